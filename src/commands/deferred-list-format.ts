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

/** How many loads are under way (they may overlap: `completion` loads every command at once). */
let loads = 0;
/** The class that was `Intl.ListFormat` when the first of them began. */
let held: typeof Intl.ListFormat | undefined;

/**
 * Runs `load` (a command's dynamic import) with `Intl.ListFormat` constructing
 * {@link DeferredListFormat}s, and puts the class back when the last overlapping load settles,
 * however it settles. Only module code that runs during the load is affected: the program has
 * not started then.
 */
export async function withDeferredListFormat<T>(load: () => Promise<T>): Promise<T> {
  const intl = Intl as { ListFormat: typeof Intl.ListFormat };
  if (loads === 0) {
    const Real = intl.ListFormat;
    held = Real;
    const make = (...args: ListFormatArgs) => new Real(...args);
    const ListFormat = function ListFormat(
      this: unknown,
      locales?: ListFormatArgs[0],
      options?: ListFormatArgs[1],
    ) {
      if (new.target === undefined) throw new TypeError("Constructor Intl.ListFormat requires 'new'");
      // The options are read now, as the real constructor reads them, not at the first use.
      return new DeferredListFormat(make, locales, options === undefined ? undefined : { ...options });
    };
    Object.defineProperty(ListFormat, "supportedLocalesOf", { value: Real.supportedLocalesOf.bind(Real) });
    // A stand-in: constructing it gives an object with the real one's methods, not an instance.
    intl.ListFormat = ListFormat as unknown as typeof Intl.ListFormat;
  }
  loads += 1;
  try {
    return await load();
  } finally {
    loads -= 1;
    if (loads === 0 && held !== undefined) {
      intl.ListFormat = held;
      held = undefined;
    }
  }
}
