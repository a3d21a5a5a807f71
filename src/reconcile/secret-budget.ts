/**
 * The bound on the secret values one Deployment resource makes the operator read and send
 * (`run --max-secret-bytes`). Every entry of `spec.secrets` sends its value, so a spec listing one
 * large Secret key in many entries would make the operator build bodies, hashes and diffs of
 * their sum: the values are counted as they are read, before anything is built from them, and a
 * resource over the bound fails alone (Stalled, `SecretsTooLarge`) instead of exhausting the
 * operator's memory for every namespace.
 */

/** Default of `--max-secret-bytes`: 1 MiB. */
export const DEFAULT_MAX_SECRET_BYTES = 1_048_576;

/** One value as the budget counts it: where it comes from, its size, how many entries send it. */
export interface SecretShare {
  /** Names the value's source for a user, e.g. `key "api" of Secret "agent-keys"`. Never the value. */
  what: string;
  /** UTF-8 bytes of the value. */
  bytes: number;
  /** Entries of `spec.secrets` that send it. */
  entries: number;
}

/** The secret values a resource would send are more than the bound; nothing was sent. */
export class SecretsTooLargeError extends Error {
  override readonly name: string = "SecretsTooLargeError";
  /** Bytes counted when the reading stopped (all of them when `complete`). */
  readonly bytes: number;
  readonly limit: number;
  /** Every value was counted; otherwise the reading stopped early and `bytes` is a lower bound. */
  readonly complete: boolean;
  /** The share that weighs most of those counted. */
  readonly largest: SecretShare;

  constructor(bytes: number, limit: number, complete: boolean, largest: SecretShare) {
    const each = largest.entries === 1 ? "" : ` in each of ${largest.entries} entries`;
    super(
      `the secret values of spec.secrets come to ${complete ? "" : "at least "}${grouped(bytes)} bytes, ` +
        `more than the limit of ${grouped(limit)} (--max-secret-bytes): the largest share is ` +
        `${largest.what} (${grouped(largest.bytes)} bytes${each}); send fewer or smaller values, ` +
        "or raise the operator's --max-secret-bytes (DMS_MAX_SECRET_BYTES)",
    );
    this.bytes = bytes;
    this.limit = limit;
    this.complete = complete;
    this.largest = largest;
  }
}

/** Counts the bytes of the secret values of one resource against `limit`. */
export class SecretBudget {
  readonly limit: number;
  #bytes = 0;
  #largest: SecretShare | undefined;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Counts a value sent by `share.entries` entries. */
  add(share: SecretShare): void {
    const weight = share.bytes * share.entries;
    this.#bytes += weight;
    if (!this.#largest || weight > this.#largest.bytes * this.#largest.entries) this.#largest = share;
  }

  /**
   * Throws {@link SecretsTooLargeError} when the bytes counted so far are over the limit.
   * `complete`: every value of the resource has been counted.
   */
  check(complete: boolean): void {
    if (this.#bytes > this.limit && this.#largest)
      throw new SecretsTooLargeError(this.#bytes, this.limit, complete, this.#largest);
  }
}

/** The UTF-8 size of `value`, as the service receives it. */
export function utf8Bytes(value: string): number {
  return Buffer.byteLength(value, "utf8");
}

/** `1048576` as `1,048,576`: sizes a user compares at a glance. */
function grouped(n: number): string {
  return n.toLocaleString("en-US");
}
