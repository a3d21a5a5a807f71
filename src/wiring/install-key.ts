/**
 * The install key joined to the operator: read (or created) once at the start, before any
 * reconcile makes a secrets digest and before the sharding ring is computed, so that every
 * replica keys both with the same bytes. See `kube/install-key.ts` and docs/guide/security.md.
 */
import type { Logger } from "pino";
import { ensureInstallKey, INSTALL_KEY_SECRET, InstallKeyError } from "../kube/install-key.ts";
import { keyedSecretDigest, type SecretDigest } from "../reconcile/secret-hash.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Runnable } from "../runtime/manager.ts";

/** Between two tries after a failure that says nothing about the key (a 5xx, no connection). */
const RETRY_MS = 2_000;

/** How the key is had: `ensureInstallKey` against the cluster; tests give their own. */
export type KeySource = (namespace: string, signal: AbortSignal) => Promise<Uint8Array>;

/**
 * The key of this install, as the operator's parts wait for it. A runnable (not leader-gated:
 * every replica reads it) that reads it until it has it, then idles; an {@link InstallKeyError}
 * (an unusable Secret, no right to it) fails it, and with it the manager, naming the fix.
 */
export class InstallKey implements Runnable {
  readonly name = "install-key";
  readonly needLeaderElection = false;
  readonly namespace: string;
  readonly #source: KeySource;
  readonly #clock: Clock;
  readonly #log: Logger;
  #digest: SecretDigest | undefined;
  readonly #ready: Promise<Uint8Array>;
  #settle!: { resolve(key: Uint8Array): void; reject(error: unknown): void };

  constructor(namespace: string, source: KeySource, clock: Clock, logger: Logger) {
    this.namespace = namespace;
    this.#source = source;
    this.#clock = clock;
    this.#log = logger.child({ component: "install-key" });
    this.#ready = new Promise<Uint8Array>((resolve, reject) => {
      this.#settle = { resolve, reject };
    });
    this.#ready.catch(() => {});
  }

  /** The key once read; rejects when reading it failed for good, or when `signal` aborts first. */
  ready(signal: AbortSignal): Promise<Uint8Array> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      this.#ready.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  /**
   * The secrets' digests keyed with the key. Used only by reconciles, which start after the key
   * is read ({@link after}); before, a digest is a bug and throws.
   */
  readonly digest: SecretDigest = {
    keyed: true,
    digest: (secrets) => this.#keyed().digest(secrets),
    matches: (recorded, secrets) => this.#keyed().matches(recorded, secrets),
  };

  /** `synced` that also waits for the key (the resync starts the reconciles after it). */
  after(synced: () => Promise<unknown>): () => Promise<unknown> {
    return () => Promise.all([synced(), this.#ready]);
  }

  async start(signal: AbortSignal): Promise<void> {
    for (;;) {
      try {
        const key = await this.#source(this.namespace, signal);
        this.#digest = keyedSecretDigest(key);
        this.#settle.resolve(key);
        this.#log.info({ secret: `${this.namespace}/${INSTALL_KEY_SECRET}` }, "install key read");
        // A runnable runs until its signal: nothing more to do, and nothing to stop.
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        return;
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof InstallKeyError) {
          this.#settle.reject(err);
          throw err;
        }
        this.#log.warn({ err }, "could not read the install key; trying again");
      }
      try {
        await this.#clock.sleep(RETRY_MS, signal);
      } catch {
        return;
      }
    }
  }

  #keyed(): SecretDigest {
    if (this.#digest === undefined)
      throw new Error("a secrets digest was asked for before the install key was read");
    return this.#digest;
  }
}

/** The {@link InstallKey} of the operator's namespace, read (or created) through `client`. */
export function installKey(
  client: Parameters<typeof ensureInstallKey>[0],
  namespace: string,
  clock: Clock,
  logger: Logger,
): InstallKey {
  return new InstallKey(namespace, (ns, signal) => ensureInstallKey(client, ns, signal), clock, logger);
}
