/**
 * `dms_service_unknown_values_total`: the enum values a service answers that its spec does not
 * list (kept raw by the API client), by the connection whose service answered them. A tenant's
 * services choose these values: the series they label are bounded ({@link UnknownValues.counter}).
 */
import { Counter, type Registry } from "prom-client";

/**
 * The values of `dms_service_unknown_values_total` one tenant's connections label (their others
 * count as `other`), and the most all connections label together: one tenant's services answering
 * odd values under many names take its own share, never the others'.
 */
export const UNKNOWN_VALUES_PER_TENANT = 10;
export const UNKNOWN_VALUES_MAX = 200;

/** What one connection's client reports unknown values with (see {@link UnknownValues.counter}). */
export interface UnknownValueCounter {
  /** Counts one enum value the spec does not list; pass it as the API client's `onUnknownValue`. */
  record(unknown: { field: string; value: string }): void;
  /** Drops the connection's series and gives back its labelled values: its client is closed. */
  forget(): void;
}

/** The counter family and the shares of its labelled values (`RuntimeMetrics.unknownValues`). */
export class UnknownValues {
  readonly #counter: Counter<"connection" | "field" | "value">;
  /** Per client's counter, the `field\0value` it labels and the fields it has an `other` series of. */
  readonly #seen = new Set<{ labelled: Set<string>; others: Set<string> }>();
  /** The values labelled, all connections together, and per tenant (absent: none). */
  #labelled = 0;
  readonly #perTenant = new Map<string, number>();

  constructor(registers: Registry[]) {
    this.#counter = new Counter({
      name: "dms_service_unknown_values_total",
      help: "Values of enum fields read from the Deployment Management Service that its spec does not list (kept raw), by connection",
      labelNames: ["connection", "field", "value"],
      registers,
    });
  }

  /**
   * The counter of the connection `connection` (its key: `default`, `ServiceConnection/<ns>/<name>`)
   * for the enum values its service answers that the spec does not list; `tenant` is whose share
   * it spends (a namespace for its ServiceConnections; default: the connection's own). Values are
   * cut at 64 characters; a tenant's connections label at most {@link UNKNOWN_VALUES_PER_TENANT}
   * distinct ones, and all together at most {@link UNKNOWN_VALUES_MAX} (the rest count as `other`
   * under their connection), so a service sending odd values grows no series without bound, nor
   * takes the others' share. `forget` (the client closed) drops its series and frees its share.
   */
  counter(connection: string, tenant = connection): UnknownValueCounter {
    const seen = { labelled: new Set<string>(), others: new Set<string>() };
    let forgotten = false;
    return {
      record: (unknown) => {
        // An answer read after its client closed counts nowhere: its series are gone for good.
        if (forgotten) return;
        const value = unknown.value.slice(0, 64);
        const key = `${unknown.field}\u0000${value}`;
        const { labelled, others } = seen;
        if (
          !labelled.has(key) &&
          (this.#perTenant.get(tenant) ?? 0) < UNKNOWN_VALUES_PER_TENANT &&
          this.#labelled < UNKNOWN_VALUES_MAX
        ) {
          labelled.add(key);
          this.#labelled++;
          this.#perTenant.set(tenant, (this.#perTenant.get(tenant) ?? 0) + 1);
          this.#seen.add(seen);
        }
        if (labelled.has(key)) this.#counter.inc({ connection, field: unknown.field, value });
        else {
          others.add(unknown.field);
          this.#seen.add(seen);
          this.#counter.inc({ connection, field: unknown.field, value: "other" });
        }
      },
      forget: () => {
        if (forgotten) return;
        forgotten = true;
        for (const key of seen.labelled) {
          const cut = key.indexOf("\u0000");
          this.#counter.remove({ connection, field: key.slice(0, cut), value: key.slice(cut + 1) });
        }
        for (const field of seen.others) this.#counter.remove({ connection, field, value: "other" });
        this.#labelled -= seen.labelled.size;
        const left = (this.#perTenant.get(tenant) ?? 0) - seen.labelled.size;
        if (left > 0) this.#perTenant.set(tenant, left);
        else this.#perTenant.delete(tenant);
        this.#seen.delete(seen);
      },
    };
  }

  /** What the unknown values' counters hold: clients not forgotten, tenants with values labelled, values labelled. */
  held(): { clients: number; tenants: number; labelled: number } {
    return {
      clients: this.#seen.size,
      tenants: this.#perTenant.size,
      labelled: this.#labelled,
    };
  }
}
