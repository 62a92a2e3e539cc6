export { buildApp, type AppDeps } from './app.js';
export { startCoordinator, type RunningCoordinator } from './start.js';
export { loadConfig, DEFAULT_CONFIG, ConfigError, CONFIG_ENV_VARS, type CoordinatorConfig } from './config.js';
export { Coordinator } from './core/coordinator.js';
export { systemClock, ManualClock, type Clock } from './core/clock.js';
