// Loopback networking helpers of the harness.
import { request } from "node:https";
import { createServer } from "node:net";

/** A TCP port on 127.0.0.1 that was free a moment ago (the caller must cope with losing a race for it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("could not find a free port");
  return address.port;
}

/** Status code of an HTTPS GET verified against `ca`, with a bearer token; rejects on network errors. */
export function httpsGet(url: string, ca: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${token}` }, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}
