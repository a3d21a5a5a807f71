/**
 * The service's deployments as the reconciler's port: the client adapted ({@link deploymentsPort},
 * one per connection), its lookups by id coalesced into `deployment_ids` calls ({@link IdBatches}),
 * and the session's writes over it, which keep the snapshot's books ({@link writingThrough}).
 *
 * The service has no GET by id: a lookup by id is a listing filtered by `deployment_ids`, and
 * each one costs a request and a token of the connection's rate limit. When many resources look
 * their deployments up at once (a sharded replica taking over a dead one's share, many resources
 * edited at once, a `dms.dev/reconcile-requested-at` sweep), one call per resource queues them
 * behind the rate limit. Here the lookups waiting at the same moment go out together, up to
 * {@link POLL_BATCH} ids per call:
 *
 * - a lookup waits one `setImmediate` turn, so that those issued together share a call; a lone
 *   lookup costs one call, as before, and no wall-clock delay;
 * - while calls are in flight (waiting for their rate-limit token, or for the service), new
 *   lookups wait and go out together once they have ended;
 * - each caller gets its own id's answer, as the single lookup (`ServiceClient.getDeployment`)
 *   gives it: the deployment whose id is exactly the one asked, undefined when the listing ends
 *   without it, the call's error when the call fails. A listing is read to its end (every page)
 *   unless every id came, so a service that ignores the filter still answers each id right,
 *   only slower; an item not asked for is ignored;
 * - an item of the answer that cannot be read is reported to the id it may be (its own, or any
 *   id when it has none) and only when that id did not come, as {@link UnreadableDeploymentError}:
 *   "not found" would let the reconcile create a duplicate of what it merely could not read;
 * - each caller waits only as long as its own AbortSignal allows; a call is aborted only once
 *   every caller waiting for it gave up (as `runtime/shared-call.ts` does for listings), and no
 *   listener stays on a caller's signal once its lookup ended.
 *
 * An id that is not a uuid never joins a batch (the client refuses to send it, which would fail
 * the batch for the others; see `idBatches`): it goes to the single lookup, which reports it.
 *
 * **Read-ahead** ({@link ReadAhead}): a call with room left asks for more ids than its callers
 * wait for, those the snapshot of a sharded replica's share lacks (a share just inherited or
 * released to it: thousands of resources whose next reconciles would each look theirs up, a few
 * at a time, as the workers take them). What comes for them goes to the snapshot, for the
 * reconciles that follow. It only fills calls made anyway: never a call of its own, never a page
 * more (the call ends once its callers are answered and every id asked came, or at its short
 * page). A lookup of an id a call in flight reads ahead still makes its own call, after it: a
 * caller asking the service live (a changed spec, a rollout's confirmation) gets a read sent after
 * it asked, never one sent before.
 */
import type { ServiceClient } from "../../api/client.ts";
import { isServiceError } from "../../api/errors.ts";
import type { DeploymentLookups, DeploymentsPort, DeploymentWrites, ReadAhead } from "../ports.ts";
import type { Deployment, UnreadableDeployment } from "../service-types.ts";
import { isUuid } from "../service-types.ts";
import type { CreatePace } from "./create-pace.ts";
import { deploymentsByIds, deploymentsNamed, FULL_PAGE, listing } from "./deployment-listings.ts";
import { UnreadableDeploymentError } from "./lookup-errors.ts";
import { isTracingProjectConflict, NameReservedError } from "./name-reserved.ts";

/**
 * Adapts `client` to {@link DeploymentsPort}, its listings those of `deployment-listings.ts`;
 * concurrent `getById` calls are coalesced: build one port per connection.
 */
export function deploymentsPort(client: ServiceClient): DeploymentsPort {
  // Lookups by id waiting at the same moment share `deployment_ids` calls (see IdBatches below).
  const byId = new IdBatches({
    list: (ids, signal, skipped, enough) =>
      client.listDeployments(
        { deployment_ids: ids },
        { pageSize: FULL_PAGE, signal, onUnreadable: skipped, enoughAfterShortPage: enough },
      ),
    single: (id, signal) => client.getDeployment(id, { signal }),
  });
  return {
    readAheadFrom: (ahead) => byId.readAheadFrom(ahead),
    getById: (id, signal) =>
      byId.get(id, signal).catch((error: unknown) => {
        // The listing holds the id, or an item without one, that cannot be read.
        if (isServiceError(error, "bad_response") && error.status === 200)
          throw new UnreadableDeploymentError(error.detail);
        throw error;
      }),
    getByIds: (ids, signal) => deploymentsByIds(client, ids, signal),
    findByName: (name, signal) => deploymentsNamed(client, name, signal),
    listAll: (signal, each, skipped) => listing(client, {}, { signal }, each, skipped),
    create: (body, signal) => client.createDeployment(body, { signal }),
    patch: (id, body, signal) => client.patchDeployment(id, body, { signal }),
    delete: (id, signal, options) =>
      client.deleteDeployment(id, { signal, deleteTracingProject: options?.deleteTracingProject === true }),
    listRepos: (integrationId, signal) => client.listRepos(integrationId, { signal }),
    getRevision: (deploymentId, revisionId, signal) =>
      client.getRevision(deploymentId, revisionId, { signal }),
    getRevisionLogs: (deploymentId, revisionId, query, signal) =>
      client.getRevisionLogs(deploymentId, revisionId, query, { signal }),
    recentRevisions: async (deploymentId, signal) =>
      (await client.firstRevisionPage(deploymentId, { signal })).flatMap((row) =>
        row.ok ? [row.revision] : [],
      ),
    redeploy: (deploymentId, revisionId, signal) => client.redeploy(deploymentId, revisionId, { signal }),
    createRevision: (deploymentId, signal) => client.createRevision(deploymentId, { signal }),
  };
}

/** What a write records in the connection's snapshot (`SnapshotStore`, snapshot-store.ts). */
interface WriteBooks {
  remember(deployment: Deployment): void;
  observed(deployment: Deployment): void;
  forget(id: string): void;
}

/**
 * `port` whose writes update `snapshot` (the session's `service`):
 * - a create or a PATCH remembers what it answered (a create's deployment stays unlisted until a
 *   read shows it); a PATCH or a delete answered 404 forgets the deployment;
 * - a create refused because the name is taken (409: someone created the deployment after the
 *   listing the reconcile read) looks the name up, so that the retry adopts what it finds, then
 *   fails with the service's answer; or, when no deployment holds the name and the answer speaks
 *   of a tracing project, with {@link NameReservedError}.
 */
export function writingThrough(
  port: DeploymentLookups & DeploymentWrites,
  snapshot: WriteBooks,
  pace: CreatePace,
): DeploymentLookups & DeploymentWrites {
  const forgetIfGone = (id: string, error: unknown): never => {
    if (isServiceError(error, "not_found")) snapshot.forget(id);
    throw error;
  };
  return {
    getById: (id, signal) => port.getById(id, signal),
    findByName: (name, signal) => pace.timed("lookup", () => port.findByName(name, signal)),
    create: async (body, signal) => {
      const post = () => port.create(body, signal);
      const created = await pace.timed("post", post).catch(async (error: unknown) => {
        if (!isServiceError(error, "conflict")) throw error;
        const { deployments, unreadable } = await port.findByName(body.name, signal);
        for (const deployment of deployments) snapshot.observed(deployment);
        // No deployment holds the name, and the service speaks of a tracing project: see name-reserved.ts.
        if (deployments.length === 0 && unreadable.length === 0 && isTracingProjectConflict(error))
          throw new NameReservedError(body.name, error);
        throw error;
      });
      snapshot.remember(created);
      return created;
    },
    patch: async (id, body, signal) => {
      const updated = await port.patch(id, body, signal).catch((error: unknown) => forgetIfGone(id, error));
      snapshot.remember(updated);
      return updated;
    },
    delete: (id, signal, options) =>
      port.delete(id, signal, options).catch((error: unknown) => forgetIfGone(id, error)),
  };
}

/** Ids per `deployment_ids` lookup: the service's largest page, so one call answers for all. */
export const POLL_BATCH = 100;

/**
 * `ids` in batches of at most {@link POLL_BATCH}, each id once. An id that is not a uuid is left
 * out: the client refuses to send one, which would fail the whole batch for the others (a
 * status is a record anyone who may write it can forge); its resource's own lookup reports it.
 */
export function idBatches(ids: Iterable<string>): string[][] {
  const batches: string[][] = [];
  const seen = new Set<string>();
  let batch: string[] = [];
  for (const id of ids) {
    if (seen.has(id) || !isUuid(id)) continue;
    seen.add(id);
    batch.push(id);
    if (batch.length === POLL_BATCH) {
      batches.push(batch);
      batch = [];
    }
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/**
 * The deployments whose ids are `ids` (`deployment_ids`, at most {@link POLL_BATCH}), every page
 * under `signal`, each item that cannot be read handed to `skipped`; after a short page, no more
 * when `enough` says so (`ListDeploymentsOptions.enoughAfterShortPage`).
 */
export type IdListing = (
  ids: readonly string[],
  signal: AbortSignal,
  skipped: (item: UnreadableDeployment) => void,
  enough: () => boolean,
) => AsyncIterable<Deployment>;

/** What {@link IdBatches} is built over. */
export interface IdBatchesOptions {
  /** The listing by ids one batch makes. */
  list: IdListing;
  /** The lookup of one id on its own: for an id that is not a uuid, which it reports. */
  single: (id: string, signal: AbortSignal) => Promise<Deployment | undefined>;
  /** Runs `flush` after the lookups issued with this one; default `setImmediate`. */
  defer?: (flush: () => void) => void;
}

/** One caller waiting for its id. */
interface Waiter {
  resolve(deployment: Deployment | undefined): void;
  reject(error: unknown): void;
  /** The group it waits in now: the pending one, then its batch's. */
  group: Group;
}

/** Callers by id, waiting together: the pending lookups, or those of one batch. */
interface Group {
  waiters: Map<string, Set<Waiter>>;
  /** Ids the batch reads ahead, for no caller of its own. */
  ahead?: Set<string>;
  /** Aborts the batch's call once its last caller gave up (absent while pending). */
  abort?: AbortController;
}

/** Coalesces concurrent lookups by id of one connection; see the module comment. */
export class IdBatches {
  readonly #list: IdListing;
  readonly #single: IdBatchesOptions["single"];
  readonly #defer: (flush: () => void) => void;
  #pending: Group = { waiters: new Map() };
  #scheduled = false;
  /** Batch calls in flight (an abandoned one no longer counts). */
  #inFlight = 0;
  #readAhead: ReadAhead | undefined;

  constructor(options: IdBatchesOptions) {
    this.#list = options.list;
    this.#single = options.single;
    this.#defer = options.defer ?? ((flush) => setImmediate(flush));
  }

  /** From now on, calls with room read ahead the ids `ahead` gives (see the module comment). */
  readAheadFrom(ahead: ReadAhead | undefined): void {
    this.#readAhead = ahead;
  }

  /** The deployment with this id, or undefined when the service has none. */
  get(id: string, signal: AbortSignal): Promise<Deployment | undefined> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (!isUuid(id)) return this.#single(id, signal);
    return new Promise<Deployment | undefined>((resolve, reject) => {
      const onAbort = () => {
        this.#leave(waiter, id);
        reject(signal.reason);
      };
      const done = () => signal.removeEventListener("abort", onAbort);
      const waiter: Waiter = {
        group: this.#pending,
        resolve: (deployment) => {
          done();
          resolve(deployment);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      join(this.#pending, id, waiter);
      this.#schedule();
    });
  }

  /** A caller gave up: it leaves its group, and a batch nobody waits for any more is aborted. */
  #leave(waiter: Waiter, id: string): void {
    const { group } = waiter;
    const set = group.waiters.get(id);
    if (!set?.delete(waiter)) return;
    if (set.size === 0) group.waiters.delete(id);
    // A batch nobody waits for is not kept for what it reads ahead.
    if (group.waiters.size === 0 && group.abort && !group.abort.signal.aborted) {
      // Its lookups wait no longer for it: the next ones go out at once.
      this.#ended();
      group.abort.abort(new Error("every lookup of the batch gave up"));
    }
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight > 0 || this.#pending.waiters.size === 0) return;
    this.#scheduled = true;
    this.#defer(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  /** Sends every pending lookup, {@link POLL_BATCH} ids per call. */
  #flush(): void {
    if (this.#inFlight > 0) return;
    const pending = this.#pending;
    this.#pending = { waiters: new Map() };
    const batches = idBatches(pending.waiters.keys());
    for (const [i, ids] of batches.entries()) {
      const abort = new AbortController();
      const group: Group = { waiters: new Map(), abort };
      for (const id of ids) {
        const set = pending.waiters.get(id) ?? new Set();
        for (const waiter of set) waiter.group = group;
        group.waiters.set(id, set);
      }
      if (i === batches.length - 1) this.#fillAhead(group, ids.length);
      this.#inFlight += 1;
      void this.#run(group, abort);
    }
  }

  /** The room left in `group`'s call, of `asked` ids, filled with ids read ahead. */
  #fillAhead(group: Group, asked: number): void {
    const room = POLL_BATCH - asked;
    if (this.#readAhead === undefined || room <= 0) return;
    const ahead = new Set<string>();
    for (const id of this.#readAhead.ids(room, new Set(group.waiters.keys()))) {
      if (ahead.size >= room) break;
      if (group.waiters.has(id) || !isUuid(id)) continue;
      ahead.add(id);
    }
    if (ahead.size > 0) group.ahead = ahead;
  }

  /** A batch call ended (or was abandoned): the lookups that waited meanwhile go out. */
  #ended(): void {
    this.#inFlight -= 1;
    this.#schedule();
  }

  /** Makes one batch's call and answers each of its callers. */
  async #run(group: Group, abort: AbortController): Promise<void> {
    const ahead = group.ahead ?? new Set<string>();
    const ids = [...group.waiters.keys(), ...ahead];
    const asked = new Set(ids.map((id) => id.toLowerCase()));
    // The first unreadable item that may be each id's: its own, or one without an id.
    const hidden = new Map<string, UnreadableDeployment>();
    let hiddenAny: UnreadableDeployment | undefined;
    const skipped = (item: UnreadableDeployment) => {
      if (item.id === undefined) hiddenAny ??= item;
      else {
        const id = item.id.toLowerCase();
        if (asked.has(id) && !hidden.has(id)) hidden.set(id, item);
      }
    };
    // Items read: past one page's worth, ids read ahead keep no call going (a service ignoring
    // the filter would list everything).
    let read = 0;
    try {
      // Ids read ahead and not found ask for no empty page to prove them gone.
      const enough = () => group.waiters.size === 0;
      for await (const deployment of this.#list(ids, abort.signal, skipped, enough)) {
        read += 1;
        if (ahead.delete(deployment.id)) this.#readAhead?.found(deployment);
        const set = group.waiters.get(deployment.id);
        if (set) {
          group.waiters.delete(deployment.id);
          for (const waiter of set) waiter.resolve(deployment);
        }
        if (group.waiters.size === 0 && (ahead.size === 0 || read >= POLL_BATCH)) break;
      }
      for (const [id, set] of group.waiters) {
        const item = hidden.get(id.toLowerCase()) ?? hiddenAny;
        for (const waiter of set)
          if (item) waiter.reject(new UnreadableDeploymentError(item.message));
          else waiter.resolve(undefined);
      }
    } catch (error) {
      for (const set of group.waiters.values()) for (const waiter of set) waiter.reject(error);
    } finally {
      group.waiters.clear();
      ahead.clear();
      if (!abort.signal.aborted) this.#ended();
    }
  }
}

function join(group: Group, id: string, waiter: Waiter): void {
  const set = group.waiters.get(id);
  if (set) set.add(waiter);
  else group.waiters.set(id, new Set([waiter]));
}
