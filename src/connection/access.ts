/**
 * Who may use a connection: a ClusterServiceConnection only from the namespaces its
 * `spec.namespaceSelector` selects, the default connection (the operator's own credentials, for
 * resources without `spec.connectionRef`) only from those `--default-connection-namespace-selector`
 * selects. A ServiceConnection is its own namespace's only, which `connectionOf` already ensures.
 * Absent selectors allow every namespace. Pure over the namespace labels it is given.
 */

import { type ConnectionId, describeConnection } from "../crd/connection-ref.ts";
import { CLUSTER_SERVICE_CONNECTION_KIND, type ConnectionSpec } from "../crd/connection-schema.ts";
import {
  describeFix,
  formatSelector,
  type Labels,
  labelArguments,
  type Selector,
  type SelectorResult,
  selectorFromObject,
  unmet,
} from "../crd/label-selector.ts";

/** `--default-connection-namespace-selector`, as given and as parsed. */
export interface DefaultConnectionSelector {
  text: string;
  selector: Selector;
}

/** Whether a namespace may use a connection now. */
export type Access = { kind: "allowed" } | { kind: "refused"; message: string } | { kind: "pending" };

/** Options of {@link NamespaceAccess}. */
export interface NamespaceAccessOptions {
  /**
   * The labels of a namespace from the namespace watch; undefined for a namespace not seen (yet).
   * Absent when namespaces are not watched: then any selector refuses (it cannot be checked).
   */
  labels?: (namespace: string) => Labels | undefined;
  /** Which namespaces may use the default connection; absent: every watched one. */
  defaultSelector?: DefaultConnectionSelector;
}

const ALLOWED: Access = { kind: "allowed" };
const PENDING: Access = { kind: "pending" };

/** See the module comment. */
export class NamespaceAccess {
  readonly #o: NamespaceAccessOptions;
  /** Parsed selectors, by the spec object the watch cache holds (replaced on every change). */
  readonly #parsed = new WeakMap<object, SelectorResult>();

  constructor(options: NamespaceAccessOptions = {}) {
    this.#o = options;
  }

  /**
   * Whether the resources of `namespace` may use connection `id` (undefined: the default one),
   * whose spec is `spec`. `pending` when a selector applies and the namespace has not been seen.
   */
  check(namespace: string, id: ConnectionId | undefined, spec?: ConnectionSpec): Access {
    if (!id) return this.#checkDefault(namespace);
    const selector = id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? spec?.namespaceSelector : undefined;
    if (!selector) return ALLOWED;
    const parsed = this.#parse(selector);
    const who = describeConnection(id);
    if (!parsed.ok)
      return {
        kind: "refused",
        message: `${who} may not be used: its spec.namespaceSelector is invalid (${parsed.problem}), so it refuses every namespace; a cluster admin must fix the selector`,
      };
    return this.#match(namespace, parsed.selector, (failed, labels) =>
      [
        `${who} may not be used from namespace ${namespace}: its spec.namespaceSelector (${formatSelector(parsed.selector) || "{}"}) does not select this namespace.`,
        `The namespace needs ${describeFix(failed, labels)}: if this team is meant to use that tenant, a cluster admin labels it (kubectl label namespace ${namespace} ${labelArguments(failed)}) or widens the selector; otherwise use a connection of the namespace's own (a ServiceConnection in ${namespace})`,
      ].join(" "),
    );
  }

  /** A digest of what decides access to a connection: when it changes, its users are re-checked. */
  selectorOf(spec: ConnectionSpec | undefined): string {
    const selector = spec?.namespaceSelector;
    if (!selector) return "";
    const parsed = this.#parse(selector);
    return parsed.ok ? `selects ${formatSelector(parsed.selector)}` : `invalid ${parsed.problem}`;
  }

  #checkDefault(namespace: string): Access {
    const selector = this.#o.defaultSelector;
    if (!selector) return ALLOWED;
    return this.#match(namespace, selector.selector, (failed, labels) =>
      [
        `the default connection (the operator's own credentials, for resources without spec.connectionRef) may not be used from namespace ${namespace}: --default-connection-namespace-selector (${selector.text}) does not select this namespace.`,
        `The namespace needs ${describeFix(failed, labels)}: if it is meant to use the operator's own tenant, the operator's admins label it (kubectl label namespace ${namespace} ${labelArguments(failed)}); otherwise set spec.connectionRef to a connection this namespace may use (a ServiceConnection in ${namespace})`,
      ].join(" "),
    );
  }

  #match(
    namespace: string,
    selector: Selector,
    refusal: (failed: ReturnType<typeof unmet>, labels: Labels) => string,
  ): Access {
    if (selector.length === 0) return ALLOWED;
    if (!this.#o.labels)
      return {
        kind: "refused",
        message: `namespace ${namespace} cannot be checked against a namespace selector: this operator does not watch namespaces`,
      };
    const labels = this.#o.labels(namespace);
    if (!labels) return PENDING;
    const failed = unmet(selector, labels);
    return failed.length === 0 ? ALLOWED : { kind: "refused", message: refusal(failed, labels) };
  }

  #parse(selector: NonNullable<ConnectionSpec["namespaceSelector"]>): SelectorResult {
    let parsed = this.#parsed.get(selector);
    if (!parsed) {
      parsed = selectorFromObject(selector);
      this.#parsed.set(selector, parsed);
    }
    return parsed;
  }
}
