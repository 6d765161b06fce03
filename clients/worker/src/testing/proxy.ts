// A TCP proxy in front of the test database, to break connections the way
// networks and restarts do: cut every connection and refuse new ones for a
// while (a restart), or cut the connection that sent a write_batch after
// it committed and before its answer arrives (a lost reply).

import net from "node:net";

interface Pair {
  client: net.Socket;
  server: net.Socket;
  /** The client sent write_batch and its answer has not come back yet. */
  batchInFlight: boolean;
  /** Bytes are dropped both ways, the connection kept open (freeze). */
  frozen: boolean;
}

export class Proxy {
  private readonly server: net.Server;
  private readonly pairs = new Set<Pair>();
  private refusing = false;
  private cutNextBatch: ((pair: Pair) => Promise<boolean>) | undefined;
  /** Connections cut so far. */
  cuts = 0;

  private constructor(
    private readonly target: { host: string; port: number },
    server: net.Server,
  ) {
    this.server = server;
  }

  /** A proxy to the database of url; url() gives the URL through it. */
  static async start(targetURL: string): Promise<Proxy> {
    const u = new URL(targetURL);
    const target = { host: u.hostname, port: Number(u.port || 5432) };
    let self: Proxy | undefined;
    // Half-open, so that a frozen connection also swallows a FIN, as a
    // network that drops every packet does; otherwise each end is passed on.
    const server = net.createServer({ allowHalfOpen: true }, (client) => self!.accept(client));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    self = new Proxy(target, server);
    return self;
  }

  /** targetURL with the proxy's address. */
  url(targetURL: string): string {
    const u = new URL(targetURL);
    const addr = this.server.address() as net.AddressInfo;
    u.hostname = "127.0.0.1";
    u.port = String(addr.port);
    return u.toString();
  }

  private accept(client: net.Socket): void {
    if (this.refusing) {
      client.destroy();
      return;
    }
    const server = net.connect(this.target.port, this.target.host);
    const pair: Pair = { client, server, batchInFlight: false, frozen: false };
    this.pairs.add(pair);
    const close = () => {
      this.pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on("error", close).on("close", close);
    server.on("error", close).on("close", close);
    client.on("end", () => {
      if (!pair.frozen) server.end();
    });
    client.on("data", (d) => {
      if (pair.frozen) return;
      if (d.includes("write_batch")) pair.batchInFlight = true;
      server.write(d);
    });
    server.on("data", (d) => {
      if (pair.frozen) return;
      const hook = this.cutNextBatch;
      if (pair.batchInFlight && hook) {
        pair.batchInFlight = false;
        this.cutNextBatch = undefined;
        server.pause();
        // The answer is held back while the hook looks at the database;
        // then it is dropped with the connection, or passed on.
        hook(pair).then((cut) => {
          if (cut) {
            this.cuts++;
            close();
          } else {
            client.write(d);
            server.resume();
          }
        });
        return;
      }
      pair.batchInFlight = false;
      client.write(d);
    });
  }

  /**
   * Cuts the connection of the next write_batch whose answer arrives, once
   * committed(pair) (which may read the database directly) says the batch
   * did commit; resolves when the cut is done.
   */
  cutAfterCommit(committed: () => Promise<boolean>): Promise<void> {
    return new Promise((resolve) => {
      this.cutNextBatch = async () => {
        const ok = await committed();
        if (ok) setImmediate(resolve);
        else this.cutAfterCommit(committed).then(resolve);
        return ok;
      };
    });
  }

  /**
   * Drops every byte of the connections open now, both ways, and keeps
   * them open: a network that loses packets without a reset, which TCP
   * notices only after hours. New connections go through.
   */
  freeze(): void {
    for (const p of this.pairs) p.frozen = true;
  }

  /** Cuts every connection and refuses new ones for ms, as a database restart does. */
  async restart(ms: number): Promise<void> {
    this.refusing = true;
    for (const p of [...this.pairs]) {
      this.cuts++;
      p.client.destroy();
      p.server.destroy();
    }
    await new Promise((r) => setTimeout(r, ms));
    this.refusing = false;
  }

  async close(): Promise<void> {
    for (const p of [...this.pairs]) {
      p.client.destroy();
      p.server.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
