# syntax=docker/dockerfile:1
# Multi-stage build: compile the TypeScript workspaces, then run the coordinator as a non-root
# user on port 8765. The same image runs a launcher (see docker-compose.yml).
#
# The image runs a supported Node.js LTS (Node 20 reached its end of life in April 2026); the
# code and `engines` still support Node 20.18.1 and later for those who run it outside Docker.
# Another LTS: docker build --build-arg NODE_IMAGE=node:22-bookworm-slim .
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
# better-sqlite3 compiles its addon when no prebuilt binary can be downloaded for this Node
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY apps ./apps
# bench/ is a workspace (its devDependencies: bullmq for npm run bench:compare); npm ci needs its
# package.json, the image needs nothing else of it
COPY bench/package.json ./bench/
RUN npm ci --no-audit --no-fund
RUN npx tsc -b packages/protocol packages/client apps/coordinator apps/launcher apps/cli \
 && npm run build -w @agentq/dashboard \
 && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8765 \
    DATABASE_URL=sqlite:/var/lib/agentq/agentq.db
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/packages ./packages
COPY --from=build --chown=node:node /app/apps ./apps
# the database's home (DATABASE_URL above), and the homes of the tokens (volumes in
# docker-compose.yml: a new named volume takes the owner of the directory it is mounted on)
RUN mkdir -p /var/lib/agentq /var/lib/agentq-auth /var/lib/agentq-launcher \
 && chown node:node /var/lib/agentq /var/lib/agentq-auth /var/lib/agentq-launcher
USER node
VOLUME ["/var/lib/agentq"]
EXPOSE 8765
# /health is public (no token); over HTTPS the probe of this loopback address skips the
# certificate check (the certificate names the host, not 127.0.0.1)
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "const tls = !!process.env.TLS_CERT_FILE; if (tls) process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0'; fetch((tls ? 'https' : 'http') + '://127.0.0.1:' + (process.env.PORT || 8765) + '/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "apps/coordinator/dist/src/main.js"]
