/**
 * A forward proxy on loopback as a corporate egress proxy is: `CONNECT host:port` opens a tunnel
 * (counted, with its target), anything else is refused. `refuse` answers every CONNECT 403, as a
 * proxy whose policy denies the host.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { connect } from "node:net";

/** A running proxy. */
export interface ConnectProxy {
  /** `http://127.0.0.1:<port>`, for HTTPS_PROXY. */
  url: string;
  /** The target (`host:port`) of every CONNECT received, in order. */
  tunnels: string[];
  close(): Promise<void>;
}

/** Starts a CONNECT proxy on an ephemeral loopback port. */
export async function startConnectProxy(options: { refuse?: boolean } = {}): Promise<ConnectProxy> {
  const tunnels: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(405, { "content-type": "text/plain" });
    res.end("this proxy only tunnels (CONNECT)\n");
  });
  server.on("connect", (req, client: Socket, head: Buffer) => {
    const target = req.url ?? "";
    tunnels.push(target);
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    if (options.refuse) {
      client.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    const colon = target.lastIndexOf(":");
    const upstream = connect(Number(target.slice(colon + 1)), target.slice(0, colon), () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    tunnels,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
