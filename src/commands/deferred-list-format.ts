/**
 * Loading code while `Intl.ListFormat` makes its formatter when first used, not when constructed.
 *
 * The HTTP client's type checks (`@sindresorhus/is`, which `got` imports) construct two list
 * formatters when their module loads, for the wording of an error message. Constructing one reads
 * ICU's list patterns and locale data out of the Node binary: measured at 5.7 MiB of resident
 * memory (`got` imported alone: 72.6 MiB with them, 66.9 without), in every process, for a
 * message the operator does not write in its work. A formatter constructed while a command's code
 * loads is a {@link DeferredListFormat}: the same answers, with ICU read on the first call.
 *
 * Imports nothing.
 */

type ListFormatArgs = ConstructorParameters<typeof Intl.ListFormat>;

/**
 * Stands for an `Intl.ListFormat` until it is used: the first call constructs the real one (with
 * the class that was `Intl.ListFormat` when the load began) and every call is answered by it. A
 * locale or option the real class refuses is refused at that first call instead of at
 * construction.
 */
export class DeferredListFormat {
  readonly #args: ListFormatArgs;
  readonly #make: (...args: ListFormatArgs) => Intl.ListFormat;
  #real: Intl.ListFormat | undefined;

  constructor(make: (...args: ListFormatArgs) => Intl.ListFormat, ...args: ListFormatArgs) {
    this.#make = make;
    this.#args = args;
  }

  #formatter(): Intl.ListFormat {
    this.#real ??= this.#make(...this.#args);
    return this.#real;
  }

  format(list: Iterable<string>): string {
    return this.#formatter().format(list);
  }

  formatToParts(list: Iterable<string>): ReturnType<Intl.ListFormat["formatToParts"]> {
    return this.#formatter().formatToParts(list);
  }

  resolvedOptions(): Intl.ResolvedListFormatOptions {
    return this.#formatter().resolvedOptions();
  }

  get [Symbol.toStringTag](): string {
    return "Intl.ListFormat";
  }
}

/**
 * Runs `load` (a command's dynamic import) with `Intl.ListFormat` constructing
 * {@link DeferredListFormat}s, and puts the class back when it settles. Only module code that
 * runs during the load is affected; nothing else runs then (the program has not started).
 */
export async function withDeferredListFormat<T>(load: () => Promise<T>): Promise<T> {
  const intl = Intl as { ListFormat: typeof Intl.ListFormat };
  const Real = intl.ListFormat;
  const make = (...args: ListFormatArgs) => new Real(...args);
  const Deferred = function ListFormat(...args: ListFormatArgs) {
    return new DeferredListFormat(make, ...args);
  } as unknown as typeof Intl.ListFormat;
  Object.defineProperty(Deferred, "supportedLocalesOf", { value: Real.supportedLocalesOf.bind(Real) });
  intl.ListFormat = Deferred;
  try {
    return await load();
  } finally {
    intl.ListFormat = Real;
  }
}
