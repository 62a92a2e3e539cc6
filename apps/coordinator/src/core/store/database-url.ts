/**
 * A database URL fit for a log line or an error message: its password written `***`.
 *
 * The password can be in the userinfo (`postgres://user:secret@host/db`), where it may itself hold
 * an `@` the URL parser reads as part of it (the last `@` ends the userinfo, so `u:p@ss@host` is
 * user `u` with password `p@ss`) and the user may be empty (`postgres://:secret@host`); or in the
 * query (`?password=secret`, which node-postgres reads too, as it does `sslpassword`). Everything
 * from `://` to the last `@` is taken as userinfo: a URL with an `@` further on loses more than
 * its password in the log, never less.
 */
export function redactDatabaseUrl(url: string): string {
  let out = url;
  const start = out.indexOf('://');
  if (start !== -1) {
    const at = out.lastIndexOf('@');
    if (at > start) {
      const userinfo = out.slice(start + 3, at);
      const colon = userinfo.indexOf(':');
      if (colon !== -1) out = `${out.slice(0, start + 3)}${userinfo.slice(0, colon)}:***${out.slice(at)}`;
    }
  }
  return out.replace(/([?&](?:password|sslpassword)=)[^&#]*/gi, '$1***');
}
