/**
 * How a reflector lists: as one stream where the API server offers it, else by pages (as any
 * collection is listed whole: {@link listPages}, which reads list answers, {@link listMeta}).
 *
 * A list as one stream (the API server's *watch list*, KEP-3157; client-go's `WatchListClient`):
 * a watch with `sendInitialEvents=true` sends every current object as an ADDED event, then a
 * BOOKMARK annotated `k8s.io/initial-events-end`, then goes on as a watch. Served from the API
 * server's watch cache in one request and parsed one object at a time: a reflector fills its
 * cache without paging (10,000 objects: one request instead of 200 pages of 50) and without a
 * page of tenant-sized objects in memory at once. Where a watch list fails, {@link ListChoice}
 * says whether that one list, or every list from then on, goes by pages.
 */
import type { Logger } from "pino";
import { GROUP } from "../crd/schema.ts";
import { isRecord } from "../runtime/json.ts";
import { objectKey } from "../runtime/queue-records.ts";
import type { KubeClient, KubeRequest } from "./client.ts";
import { apiErrorFrom, KubeApiError, StreamIdleError } from "./errors.ts";
import { collectionPath, type KubeObject, type ResourceType, refOf } from "./object.ts";

/**
 * Objects per page of a paged list. A page is read and parsed whole before decode trims each
 * object, and a tenant decides what an object weighs (256 KiB of annotations, with labels and its
 * spec about 1 MiB): 500 objects of 200 KiB, client-go's page, took the operator to 331 MiB at
 * start, past its container's limit (256 MiB). 50 keeps a page of such objects near 10 MiB; a
 * watch list holds one object at a time.
 */
export const LIST_PAGE_SIZE = 50;

/**
 * The longest a watch may say nothing (no event, no bookmark) before it is given up and resumed
 * from its last resourceVersion on a new connection: a watch a stuck proxy keeps open but silent
 * would otherwise last its whole timeout (5-10 min), the cache stale all along. The API server
 * sends a watch that asks for bookmarks one a minute; two and a half periods, so that a bookmark
 * late on a busy server does not cut a watch that works.
 */
export const WATCH_IDLE_MS = 150_000;

/** What a reflector's decode makes of an object: kept, `undefined` unusable, `null` not kept. */
type Decode<T> = (raw: unknown) => T | undefined | null;

/** What a reflector lists and watches. */
export interface ListScope {
  client: KubeClient;
  resource: ResourceType;
  /** One namespace, or all namespaces when `undefined`. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** `Accept` headers for the list and the watch (metadata-only watches set these). */
  accept?: { list: string; watch: string };
  /** Page size of a paged list; {@link LIST_PAGE_SIZE}. */
  pageSize?: number;
}

/** A paged list of `scope`, decoded: the objects by key, and the list's resourceVersion. */
export async function listByPages<T extends KubeObject>(
  scope: ListScope,
  signal: AbortSignal,
  decode: Decode<T>,
): Promise<{ fresh: Map<string, T>; resourceVersion: string }> {
  const fresh = new Map<string, T>();
  const request = {
    path: collectionPath(scope.resource, scope.namespace),
    query: {
      limit: scope.pageSize ?? LIST_PAGE_SIZE,
      continue: undefined,
      labelSelector: scope.labelSelector,
      fieldSelector: scope.fieldSelector,
    },
    ...(scope.accept ? { accept: scope.accept.list } : {}),
    signal,
  };
  const resourceVersion = await listPages(scope.client, request, (raw) => {
    const obj = decode(raw);
    if (obj) fresh.set(objectKey(refOf(obj)), obj);
  });
  return { fresh, resourceVersion };
}

/** The annotation of the bookmark that ends the initial events. */
const INITIAL_EVENTS_END = "k8s.io/initial-events-end";

/** The query of a watch list: from the newest state (no resourceVersion), bookmarks on. */
export const WATCH_LIST_QUERY = {
  sendInitialEvents: true,
  resourceVersionMatch: "NotOlderThan",
  allowWatchBookmarks: true,
} as const;

/** The resourceVersion of the bookmark that ends the initial events, or `undefined` for any other event. */
export function initialEventsEnd(event: unknown): string | undefined {
  if (!isRecord(event) || event.type !== "BOOKMARK" || !isRecord(event.object)) return undefined;
  const meta = event.object.metadata;
  if (!isRecord(meta) || !isRecord(meta.annotations)) return undefined;
  if (meta.annotations[INITIAL_EVENTS_END] !== "true") return undefined;
  return typeof meta.resourceVersion === "string" ? meta.resourceVersion : undefined;
}

/** One of a watch list's initial events (not its end), into the list being filled. */
export function collectInitialEvent<T extends KubeObject>(
  event: unknown,
  fresh: Map<string, T>,
  decode: Decode<T>,
): void {
  if (!isRecord(event) || event.type === "BOOKMARK") return;
  if (event.type === "ERROR") throw watchError(event.object);
  const obj = decode(event.object);
  if (!obj) return;
  const key = objectKey(refOf(obj));
  if (event.type === "DELETED") fresh.delete(key);
  else fresh.set(key, obj);
}

/** The error an ERROR event of a watch carries (a `Status`). */
export function watchError(status: unknown): Error {
  const code = isRecord(status) && typeof status.code === "number" ? status.code : 500;
  return apiErrorFrom(code, status, "watch ERROR event");
}

/** The server refused the watch list's parameters (validation: 400 or 422), not the watch. */
export function refusesWatchList(err: unknown): boolean {
  return err instanceof KubeApiError && (err.status === 400 || err.status === 422);
}

/**
 * What a failed list or watch of `type` means besides its error: a 404 for a kind of the
 * operator's API group is the API server not serving that kind, most often its CRD not installed
 * (yet), which the server's own text ("404 page not found") leaves unsaid. Asked, not asserted: a
 * proxy before the API server or a wrong server path answers the same 404, and `kubectl get crd`
 * tells them apart. Empty for any other failure,
 * and for a kind Kubernetes serves itself (the shards' Leases): no CRD of the operator's installs it.
 */
export function notServedHint(err: unknown, type: ResourceType): string {
  if (!(err instanceof KubeApiError && err.status === 404 && type.group === GROUP)) return "";
  const kind = `${type.plural}.${type.group}`;
  return `: the API server does not serve ${kind}; is its CRD installed? (kubectl get crd ${kind}; install with kubectl apply -k manifests/crd, the release's crds.yaml, or the Helm chart)`;
}

/** Thrown when a watch list's stream ended before its initial events did. */
export class InitialEventsCut extends Error {
  override readonly name = "InitialEventsCut";
  /** True when the server kept the stream its whole timeout without ending the initial events (it ignores the parameter). */
  readonly ignored: boolean;

  constructor(ignored: boolean) {
    super(
      ignored
        ? "the API server does not end the initial events of a watch list"
        : "the watch list ended before its initial events did",
    );
    this.ignored = ignored;
  }
}

/**
 * A watch list the server kept open its whole timeout without ending the initial events: a server
 * that serves watch lists ends them as soon as it sent them.
 */
export function isIgnored(err: unknown): boolean {
  return err instanceof InitialEventsCut && err.ignored;
}

/**
 * Silent watch lists in a row after which a reflector lists by pages for good: a stall that
 * comes back at each of three lists is the way to the server (a proxy that holds the stream back)
 * or a server that ignores the parameter and sends no bookmarks, not a passing one.
 */
export const SILENT_WATCH_LISTS = 3;

/**
 * How a reflector's next list goes: by a watch list, or by pages. By pages for good where the
 * server refuses a watch list (400, 422: the feature gate off) or ignores it (it kept the stream
 * its whole timeout without ending the initial events: a server from before Kubernetes 1.27;
 * asking again would cost each list a whole timeout). By pages for one list where a watch list
 * went silent before its initial events ended (a network stall, an overloaded API server, a
 * proxy): making progress is better than waiting, and the next list asks for a watch list again
 * (client-go's reflector does the same); after {@link SILENT_WATCH_LISTS} such in a row, by
 * pages for good. A list thus waits at most one watch list's silence ({@link WATCH_IDLE_MS})
 * before its pages, and lists that keep going silent cost that {@link SILENT_WATCH_LISTS} times.
 */
export class ListChoice {
  /** The server may serve watch lists (nothing showed it does not). */
  #offered = true;
  /** The list under way goes by pages (its watch list went silent). */
  #thisList = false;
  /** Watch lists that went silent since one last ended its initial events. */
  #silent = 0;

  /** The list due goes by pages. */
  get byPages(): boolean {
    return !this.#offered || this.#thisList;
  }

  /** The list due is complete: the next one asks for a watch list again, where the server offers them. */
  listed(): void {
    if (!this.byPages) this.#silent = 0;
    this.#thisList = false;
  }

  /**
   * Whether the failure `err` of a watch list makes its list go by pages (logged once per
   * fallback), rather than the watch list be asked for again after the backoff.
   */
  fallsBack(err: unknown, log: Logger): boolean {
    if (refusesWatchList(err) || isIgnored(err)) {
      this.#offered = false;
      log.info({ err }, "the API server offers no watch list; listing by pages");
      return true;
    }
    if (!(err instanceof StreamIdleError)) return false;
    this.#silent += 1;
    if (this.#silent < SILENT_WATCH_LISTS) {
      this.#thisList = true;
      log.info(
        { err },
        "the watch list went silent before its initial events ended; listing by pages this time",
      );
    } else {
      this.#offered = false;
      const what = `${SILENT_WATCH_LISTS} watch lists in a row went silent before their initial events ended`;
      log.info({ err }, `${what}; listing by pages from now on`);
    }
    return true;
  }
}

/** The `metadata.resourceVersion` of a list answer, or `undefined` when it is missing. */
export function listMeta(value: unknown): {
  resourceVersion: string | undefined;
  continue: string | undefined;
} {
  const metadata = isRecord(value) && isRecord(value.metadata) ? value.metadata : {};
  return {
    resourceVersion: typeof metadata.resourceVersion === "string" ? metadata.resourceVersion : undefined,
    continue:
      typeof metadata.continue === "string" && metadata.continue !== "" ? metadata.continue : undefined,
  };
}

/** The `items` of a list answer (empty when absent). */
export function listItems(value: unknown): unknown[] {
  return isRecord(value) && Array.isArray(value.items) ? value.items : [];
}

/**
 * Lists a collection page by page (`limit` in `request.query`, `continue` followed to the end,
 * in the place `request.query` gives it),
 * handing each item to `onItem` as its page arrives (a page is let go before the next is asked
 * for); resolves with the list's resourceVersion.
 */
export async function listPages(
  client: KubeClient,
  request: Omit<KubeRequest, "method" | "body">,
  onItem: (raw: unknown) => void,
): Promise<string> {
  let continueToken: string | undefined;
  let resourceVersion: string | undefined;
  do {
    const page = await client.request({
      ...request,
      method: "GET",
      query: { ...request.query, continue: continueToken },
    });
    const meta = listMeta(page);
    resourceVersion = meta.resourceVersion;
    continueToken = meta.continue;
    for (const raw of listItems(page)) onItem(raw);
  } while (continueToken !== undefined);
  if (resourceVersion === undefined) throw new Error("list answer has no metadata.resourceVersion");
  return resourceVersion;
}
