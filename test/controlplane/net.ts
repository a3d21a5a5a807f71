// Loopback networking helpers of the harness.
import { request } from "node:https";
import { createServer } from "node:net";

/** A TCP port on 127.0.0.1 that was free a moment ago (the caller must cope with losing a race for it). */
export async function freePort(): Promise<number> {
  // The kernel may hand the port it just freed to the next bind to port 0: two ports asked in a
  // row (an operator's metrics and probes) came back equal, and the operator refused to start.
  // A port this process was handed lately is never handed again.
  for (;;) {
    const port = await portTheKernelGives();
    if (handedPorts.includes(port)) continue;
    handedPorts.push(port);
    if (handedPorts.length > HANDED_PORTS_KEPT) handedPorts.shift();
    return port;
  }
}

/** How many ports {@link freePort} remembers handing out. */
const HANDED_PORTS_KEPT = 256;
const handedPorts: number[] = [];

/** A port bound to 0 on loopback gets, the server closed again. */
async function portTheKernelGives(): Promise<number> {
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
