/**
 * The users of each connection across the whole cluster, counted from the sharder's store of
 * every Deployment resource (the leader's only): under `--sharded` a replica's own cache holds its
 * share, so only the leader counts a connection's users and writes its status and finalizer.
 */

/** What the counts read: the sharder's store while it runs. */
export interface UsersSource {
  hasSynced(): boolean;
  /** The resources using the connection `key`. */
  usersOf(key: string): readonly { readonly metadata: { readonly namespace?: string | undefined } }[];
}

/** Each connection's users, as the leader counts them. */
export interface ClusterUsers {
  /** True while this replica leads and its store of every resource is synced: it may write. */
  ready(): boolean;
  /** How many resources use the connection `key`. */
  count(key: string): number;
  /** The namespace of each resource using the connection `key`. */
  namespaces(key: string): string[];
  /**
   * Calls `handler` with a connection key when its users changed, and with undefined when
   * {@link ready} became true (every connection is to be counted again). Returns the unsubscribe.
   */
  subscribe(handler: (key: string | undefined) => void): () => void;
}

/** {@link ClusterUsers} over the store the sharder runs while this replica leads. */
export class ClusterUserCounts implements ClusterUsers {
  #source: UsersSource | undefined;
  readonly #handlers = new Set<(key: string | undefined) => void>();

  /** The store the counts read from now on (the sharder's, once it runs). */
  use(source: UsersSource): void {
    this.#source = source;
  }

  /** Stops reading `source` (its leadership term ended), unless another replaced it. */
  release(source: UsersSource): void {
    if (this.#source === source) this.#source = undefined;
  }

  /** The users of the connection `key` changed; undefined: every connection's (the store synced). */
  changed(key: string | undefined): void {
    for (const handler of this.#handlers) handler(key);
  }

  // Arrow functions: the connections' check takes them one by one.
  readonly ready = (): boolean => this.#source?.hasSynced() ?? false;

  readonly count = (key: string): number => this.#source?.usersOf(key).length ?? 0;

  readonly namespaces = (key: string): string[] =>
    (this.#source?.usersOf(key) ?? []).map((o) => o.metadata.namespace ?? "");

  readonly subscribe = (handler: (key: string | undefined) => void): (() => void) => {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  };
}
