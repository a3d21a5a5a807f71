/**
 * The bind addresses of the operator's listeners (`--metrics-bind-address`,
 * `--health-probe-bind-address`), parsed without the server: `run`'s settings check them, and its
 * help shows them, without loading the HTTP server and the logger (health.ts).
 */

/** A parsed bind address; `host` undefined means every interface. */
export interface BindAddress {
  host: string | undefined;
  port: number;
}

/**
 * Parses a controller-runtime style bind address: `:8080` (all interfaces), `127.0.0.1:8080`,
 * `[::1]:8080`, `host:0` (any free port). `"0"` returns undefined: the listener is disabled.
 * Throws a RangeError naming the value when it is malformed.
 */
export function parseBindAddress(value: string): BindAddress | undefined {
  const trimmed = value.trim();
  if (trimmed === "0") return undefined;
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(trimmed);
  const port = Number(match?.[3]);
  if (!match || !Number.isInteger(port) || port > 65_535) {
    throw new RangeError(`invalid bind address "${value}": expected [host]:port, or 0 to disable`);
  }
  const host = match[1] ?? match[2];
  return { host: host === "" ? undefined : host, port };
}
