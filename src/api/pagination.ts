/**
 * Offset pagination as the spec describes it, made safe against a service that does not say how
 * a listing ends: follow the response's `offset`, and stop on the first empty page or on an
 * offset that does not move forward.
 */
import { ServiceError } from "./errors.ts";

/** One page as the fetcher returns it: the items and the offset to request next. */
export interface FetchedPage<T> {
  items: readonly T[];
  nextOffset: number;
  /** Items of the page the fetcher could not read and left out: the page was not empty. */
  skipped?: number;
}

/** Options of {@link paginate}. */
export interface PaginateOptions<T> {
  /** Offset of the first page. */
  offset: number;
  /** Page size sent as `limit`. */
  limit: number;
  /** Upper bound on the pages fetched; exceeding it throws rather than loop or truncate silently. */
  maxPages: number;
  /** Identity of an item, used to never yield one twice. */
  idOf: (item: T) => string;
  /** Told when the listing ended for a reason other than an empty page. */
  onEarlyEnd?: (reason: string) => void;
  /** Route reported in the error thrown when `maxPages` is exceeded. */
  route: string;
}

/**
 * Yields every item of every page, in order, once.
 *
 * Contract: fetches pages lazily (the next page only after the consumer has taken the current
 * one's items); ends on an empty page (one whose items were all skipped as unreadable is not
 * empty), on a response offset not greater than the requested one,
 * or on a page made only of items of the page before (a service ignoring `offset`); never yields
 * an id twice within a page or from one page to the next (what a listing shifted by an insert
 * repeats); throws a `bad_response` ServiceError after `maxPages` pages instead of looping.
 * A page shorter than `limit` does not end the listing: the service may cap pages on its own.
 * Only the ids of the last page are kept, not those of the whole listing: a server answering
 * 1,000 pages costs one page's ids. A caller that must never see an id twice from a hostile
 * server repeating an older page keeps its own set (it holds the items anyway).
 */
export async function* paginate<T>(
  fetchPage: (offset: number, limit: number) => Promise<FetchedPage<T>>,
  options: PaginateOptions<T>,
): AsyncGenerator<T, void, undefined> {
  let previous = new Set<string>();
  let offset = options.offset;
  for (let pages = 1; ; pages++) {
    if (pages > options.maxPages) {
      throw new ServiceError({
        kind: "bad_response",
        method: "GET",
        route: options.route,
        detail: `the listing did not end after ${options.maxPages} pages (last offset ${offset})`,
        retryable: false,
      });
    }
    const page = await fetchPage(offset, options.limit);
    const skipped = page.skipped ?? 0;
    if (page.items.length === 0 && skipped === 0) return;
    let fresh = 0;
    const current = new Set<string>();
    for (const item of page.items) {
      const id = options.idOf(item);
      if (previous.has(id) || current.has(id)) continue;
      current.add(id);
      fresh++;
      yield item;
    }
    previous = current;
    if (fresh === 0 && skipped === 0) {
      options.onEarlyEnd?.(`page at offset ${offset} held only items already listed`);
      return;
    }
    if (page.nextOffset <= offset) {
      options.onEarlyEnd?.(`response offset ${page.nextOffset} did not advance past ${offset}`);
      return;
    }
    offset = page.nextOffset;
  }
}
