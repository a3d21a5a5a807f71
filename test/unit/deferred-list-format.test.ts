// A list formatter constructed while a command loads (got's type checks make two) reads ICU's data
// only when first used, answers as the real one does, and the real class is back once the load
// settles, however it settles.
import { describe, expect, it } from "vitest";
import { DeferredListFormat, withDeferredListFormat } from "../../src/commands/deferred-list-format.ts";

describe("withDeferredListFormat", () => {
  it("makes the real formatter on its first use and answers as it does", async () => {
    const Real = Intl.ListFormat;
    let made = 0;
    const counted = (...args: ConstructorParameters<typeof Intl.ListFormat>) => {
      made += 1;
      return new Real(...args);
    };
    const formatter = new DeferredListFormat(counted, "en", { style: "long", type: "conjunction" });
    expect(made).toBe(0);
    const real = new Real("en", { style: "long", type: "conjunction" });
    expect(formatter.format(["a", "b", "c"])).toBe(real.format(["a", "b", "c"]));
    expect(formatter.formatToParts(["a", "b"])).toEqual(real.formatToParts(["a", "b"]));
    expect(formatter.resolvedOptions()).toEqual(real.resolvedOptions());
    expect(made).toBe(1);
    expect(Object.prototype.toString.call(formatter)).toBe("[object Intl.ListFormat]");
  });

  it("constructs DeferredListFormats during the load and puts Intl.ListFormat back after", async () => {
    const Real = Intl.ListFormat;
    const during = await withDeferredListFormat(async () => {
      const f = new Intl.ListFormat("en", { type: "disjunction" });
      expect(Intl.ListFormat.supportedLocalesOf(["en"])).toEqual(["en"]);
      return f;
    });
    expect(during).toBeInstanceOf(DeferredListFormat);
    expect(Intl.ListFormat).toBe(Real);
    expect(during.format(["x", "y"])).toBe("x or y");
    expect(new Intl.ListFormat("en")).toBeInstanceOf(Real);
  });

  it("puts Intl.ListFormat back when the load fails, and refuses a bad option at first use", async () => {
    const Real = Intl.ListFormat;
    let bad: Intl.ListFormat | undefined;
    await expect(
      withDeferredListFormat(async () => {
        bad = new Intl.ListFormat("en", { type: "nonsense" as "unit" });
        throw new Error("load failed");
      }),
    ).rejects.toThrow("load failed");
    expect(Intl.ListFormat).toBe(Real);
    expect(() => bad?.format(["a"])).toThrow(RangeError);
  });

  it("puts the class back only when the last of overlapping loads settles", async () => {
    const Real = Intl.ListFormat;
    let release = () => {};
    const slow = withDeferredListFormat(() => new Promise<void>((resolve) => (release = resolve)));
    const quick = await withDeferredListFormat(async () => new Intl.ListFormat("en"));
    expect(quick).toBeInstanceOf(DeferredListFormat);
    // The quick load ended while the slow one goes on: formatters are still deferred.
    expect(new Intl.ListFormat("en")).toBeInstanceOf(DeferredListFormat);
    release();
    await slow;
    expect(Intl.ListFormat).toBe(Real);
  });

  it("reads the options when constructed and refuses a call without new, as the real class does", async () => {
    const options: Intl.ListFormatOptions = { type: "disjunction" };
    const f = await withDeferredListFormat(async () => {
      const made = new Intl.ListFormat("en", options);
      const call = Intl.ListFormat as unknown as (...args: unknown[]) => unknown;
      expect(() => call("en")).toThrow(TypeError);
      return made;
    });
    options.type = "conjunction";
    expect(f.format(["a", "b"])).toBe("a or b");
  });
});
