/**
 * The certificate `/metrics` is served with over HTTPS: from a mounted directory (`tls.crt` and
 * `tls.key`, as a `kubernetes.io/tls` Secret mounts them; re-read when cert-manager renews it),
 * or, without one, a self-signed certificate made in memory at start (Prometheus then scrapes
 * with `insecureSkipVerify`; the bearer token, not the certificate, is what guards the metrics).
 */
import { readFile, stat } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import type { Logger } from "pino";
import { pino } from "pino";
import { type Clock, systemClock } from "../runtime/clock.ts";
import type { CertificatePair } from "./self-signed.ts";

/**
 * Where a TLS listener gets its certificate.
 *
 * Contract: `current` resolves a pair `node:tls` accepts (the key matches the certificate), or
 * rejects with an error naming where it looked and the fix. `watch` calls `onChange` with each
 * later valid pair until `signal` aborts; a pair that does not load is logged and skipped (the
 * last good one stays in use).
 */
export interface ServingCertificate {
  current(): Promise<CertificatePair>;
  watch(onChange: (pair: CertificatePair) => void, signal: AbortSignal): void;
}

/** Options of {@link DirectoryCertificate}. */
export interface DirectoryCertificateOptions {
  /** The directory holding `tls.crt` and `tls.key`. */
  dir: string;
  /** How often the files are looked at for a change. Default 10 s. */
  pollMs?: number;
  clock?: Clock;
  logger?: Logger;
}

/**
 * `tls.crt` and `tls.key` of a directory, looked at every `pollMs`. A stat of each file (through
 * the symbolic links a Secret volume swaps on update) is cheap; the files are read again only
 * when one changed, and a half-written pair (a key that does not match the certificate yet) is
 * retried at the next look.
 */
export class DirectoryCertificate implements ServingCertificate {
  readonly #dir: string;
  readonly #pollMs: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  #seen = "";

  constructor(options: DirectoryCertificateOptions) {
    this.#dir = options.dir;
    this.#pollMs = options.pollMs ?? 10_000;
    this.#clock = options.clock ?? systemClock;
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ component: "metrics-certificate" });
  }

  async current(): Promise<CertificatePair> {
    const version = await this.#version();
    const pair = await this.#load();
    this.#seen = version;
    return pair;
  }

  watch(onChange: (pair: CertificatePair) => void, signal: AbortSignal): void {
    let cancel = () => {};
    const look = async () => {
      try {
        const version = await this.#version();
        if (version === this.#seen || signal.aborted) return;
        const pair = await this.#load();
        this.#seen = version;
        if (signal.aborted) return;
        onChange(pair);
        this.#log.info({ dir: this.#dir }, "loaded the renewed metrics certificate");
      } catch (err) {
        this.#log.warn(
          { err, dir: this.#dir },
          "cannot load the changed metrics certificate; keeping the last one",
        );
      }
    };
    const schedule = () => {
      cancel = this.#clock.setTimer(
        this.#pollMs,
        () => void look().finally(() => signal.aborted || schedule()),
      );
    };
    signal.addEventListener("abort", () => cancel(), { once: true });
    if (!signal.aborted) schedule();
  }

  /** The identity of the files now: inode, size and mtime of each (stat follows the links). */
  async #version(): Promise<string> {
    const files = await Promise.all(
      ["tls.crt", "tls.key"].map((name) => stat(join(this.#dir, name)).catch(() => undefined)),
    );
    return files.map((s) => (s ? `${s.ino}:${s.size}:${s.mtimeMs}` : "-")).join(" ");
  }

  async #load(): Promise<CertificatePair> {
    const read = (name: string) =>
      readFile(join(this.#dir, name), "utf8").catch((err: unknown) => {
        throw new Error(
          `--metrics-cert-dir: cannot read ${join(this.#dir, name)}; mount a kubernetes.io/tls Secret there (tls.crt and tls.key), or leave the flag unset for a self-signed certificate`,
          { cause: err },
        );
      });
    // Both read at once, the first missing one (in this order) named: the same message each time.
    const [crtRead, keyRead] = await Promise.allSettled([read("tls.crt"), read("tls.key")]);
    if (crtRead.status === "rejected") throw crtRead.reason;
    if (keyRead.status === "rejected") throw keyRead.reason;
    const [cert, key] = [crtRead.value, keyRead.value];
    checkPair({ key, cert }, `--metrics-cert-dir: ${this.#dir}/tls.key and tls.crt`);
    return { key, cert };
  }
}

/** Options of {@link SelfSignedCertificate}. */
export interface SelfSignedCertificateOptions {
  /** DNS names and IP addresses the certificate names. Default: the host name, localhost, 127.0.0.1, ::1. */
  hosts?: string[];
  clock?: Clock;
}

/**
 * A self-signed certificate for the process's lifetime, made on first use. The X.509 library
 * is loaded only then: plain-HTTP metrics and the CLI commands never pay for it.
 */
export class SelfSignedCertificate implements ServingCertificate {
  readonly #hosts: string[];
  readonly #clock: Clock;
  #pair: Promise<CertificatePair> | undefined;

  constructor(options: SelfSignedCertificateOptions = {}) {
    this.#hosts = options.hosts ?? [hostname(), "localhost", "127.0.0.1", "::1"];
    this.#clock = options.clock ?? systemClock;
  }

  current(): Promise<CertificatePair> {
    this.#pair ??= import("./self-signed.ts").then(({ selfSigned }) =>
      selfSigned(this.#hosts, new Date(this.#clock.now())),
    );
    return this.#pair;
  }

  /** Never changes. */
  watch(): void {}
}

/** Throws, prefixed with `what`, when `node:tls` does not accept the pair (e.g. the key does not match). */
function checkPair(pair: CertificatePair, what: string): void {
  try {
    createSecureContext(pair);
  } catch (err) {
    throw new Error(`${what}: not a usable key and certificate: ${(err as Error).message}`, { cause: err });
  }
}
