// The memory techniques of src/runtime/, each on a table of cases: what they keep, and that what
// a caller reads back is what it put.
import { describe, expect, it } from "vitest";
import {
  addItem,
  type Identified,
  itemsOf,
  type OneOrMany,
  type PackedRecord,
  packRecord,
  REF,
  removeItem,
  SHAPE_MAX_CHARS,
  SHAPE_MAX_KEYS,
  SHAPES_KEPT,
  SHARED_VALUES_KEPT,
  Shapes,
  SharedValues,
  unpackRecord,
} from "../../src/runtime/compact.ts";
import {
  Interner,
  internFields,
  keepEqualStrings,
  SHARED_OBJECT_MAX_CHARS,
  SharedObjects,
  shareEqualString,
  shareFrom,
} from "../../src/runtime/json.ts";

/** A string equal to `text` but not the same in the heap (as JSON.parse makes them). */
const copyOf = (text: string): string => JSON.parse(JSON.stringify(text)) as string;

describe("Interner", () => {
  it.each([
    { max: 4, puts: ["a", "b", "a"], size: 2 },
    { max: 2, puts: ["a", "b", "c"], size: 1 },
    { max: 2, puts: ["a", "b", "a", "c", "a"], size: 2 },
    { max: 1, puts: ["a", "a", "a"], size: 1 },
  ])("of $puts with room for $max holds $size", ({ max, puts, size }) => {
    const interner = new Interner(max);
    for (const value of puts) expect(interner.of(value)).toBe(value);
    expect(interner.size).toBe(size);
  });

  it("holds one entry for equal strings parsed apart, and starts again when full", () => {
    const interner = new Interner(2);
    const first = "x".repeat(40);
    expect(interner.of(first)).toBe(first);
    expect(interner.of(copyOf(first))).toBe(first);
    expect(interner.size).toBe(1);
    interner.of("y");
    interner.of("z");
    expect(interner.size).toBe(1);
  });

  it.each<{ obj: Record<string, unknown>; fields: string[]; out: Record<string, unknown>; held: number }>([
    { obj: { a: "v", b: 1 }, fields: ["a", "b"], out: { a: "v", b: 1 }, held: 1 },
    { obj: { a: "v" }, fields: ["a", "c"], out: { a: "v" }, held: 1 },
    { obj: { a: "v", b: "v" }, fields: ["a", "b"], out: { a: "v", b: "v" }, held: 1 },
    { obj: { a: "v", b: "w" }, fields: ["b"], out: { a: "v", b: "w" }, held: 1 },
  ])("internFields($obj, $fields) keeps the values and adds no field", ({ obj, fields, out, held }) => {
    const interner = new Interner(8);
    expect(internFields(interner, obj, fields)).toStrictEqual(out);
    expect(interner.size).toBe(held);
  });
});

describe("SharedObjects", () => {
  it("holds one frozen copy of equal values parsed apart, and never changes the value given", () => {
    const objects = new SharedObjects(8);
    const text = '{"resourceSpec":{"minScale":1,"maxScale":2},"tags":["a","b"]}';
    const first = JSON.parse(text) as Record<string, unknown>;
    const held = objects.of(first);
    expect(held).not.toBe(first);
    expect(held).toStrictEqual(first);
    expect(Object.isFrozen(first)).toBe(false);
    expect(objects.of(JSON.parse(text))).toBe(held);
    expect(objects.size).toBe(1);
    // Frozen all the way down: no holder can change it under the others.
    expect(Object.isFrozen(held)).toBe(true);
    expect(Object.isFrozen(held.resourceSpec)).toBe(true);
    expect(Object.isFrozen(held.tags)).toBe(true);
    expect(() => {
      (held.resourceSpec as Record<string, unknown>).minScale = 3;
    }).toThrow(TypeError);
    // Another order of the same fields is another value (its JSON differs), held apart.
    expect(objects.of(JSON.parse('{"tags":["a","b"],"resourceSpec":{"minScale":1,"maxScale":2}}'))).not.toBe(
      held,
    );
  });

  it("holds a part frozen all the way down as it is, and copies one frozen only on the surface", () => {
    const objects = new SharedObjects(8);
    const ready = objects.of({ type: "Ready", status: "True" });
    const synced = objects.of({ type: "Synced", status: "True" });
    const list = objects.of([ready, synced]);
    expect(list[0]).toBe(ready);
    expect(list[1]).toBe(synced);
    // Frozen on its surface only: a holder could change what it holds, so it is copied.
    const inner = { minScale: 1 };
    const shallow = Object.freeze({ resourceSpec: inner });
    const held = objects.of({ spec: shallow });
    expect(held.spec).not.toBe(shallow);
    expect(held.spec.resourceSpec).not.toBe(inner);
    expect(Object.isFrozen(held.spec.resourceSpec)).toBe(true);
    inner.minScale = 2;
    expect(held.spec.resourceSpec.minScale).toBe(1);
  });

  it("keeps an own field named __proto__ a field, and its strings the same strings", () => {
    const objects = new SharedObjects(8);
    const value = JSON.parse('{"__proto__":{"x":1},"name":"n"}') as Record<string, unknown>;
    const held = objects.of(value);
    expect(Object.hasOwn(held, "__proto__")).toBe(true);
    expect(Object.getPrototypeOf(held)).toBe(Object.prototype);
    expect(JSON.stringify(held)).toBe(JSON.stringify(value));
  });

  it("leaves a value over its length bound its own, and starts again when full", () => {
    const objects = new SharedObjects(2);
    const big = { text: "x".repeat(SHARED_OBJECT_MAX_CHARS) };
    expect(objects.of(big)).toBe(big);
    expect(objects.size).toBe(0);
    objects.of({ a: 1 });
    objects.of({ b: 1 });
    objects.of({ c: 1 });
    expect(objects.size).toBe(1);
  });
});

describe("keepEqualStrings", () => {
  /** `value` (an object or array, at any depth) whose assignments are recorded by path. */
  function recorded(value: unknown, writes: string[], path = ""): unknown {
    if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
    const target = value as Record<string, unknown>;
    for (const key of Object.keys(target)) target[key] = recorded(target[key], writes, `${path}/${key}`);
    return new Proxy(target, {
      set(obj, key, item) {
        writes.push(`${path}/${String(key)}`);
        obj[key as string] = item;
        return true;
      },
    });
  }

  it.each<{ next: unknown; previous: unknown; writes: string[] }>([
    {
      next: { metadata: { name: "a", uid: "u1" }, status: { id: "r2" } },
      previous: { metadata: { name: "a", uid: "u1" }, status: { id: "r1" } },
      writes: ["/metadata/name", "/metadata/uid"],
    },
    {
      next: { conditions: [{ type: "Ready", message: "m" }, { type: "Synced" }] },
      previous: { conditions: [{ type: "Ready", message: "other" }] },
      writes: ["/conditions/0/type"],
    },
    // Wherever the equal string is in either: an image the previous held in its spec only.
    {
      next: { spec: { image: "i" }, status: { live: { image: "i" } } },
      previous: { spec: { image: "i" } },
      writes: ["/spec/image", "/status/live/image"],
    },
    { next: { a: ["x"], b: "y", c: 1 }, previous: { a: { 0: "x" }, c: 1 }, writes: ["/a/0"] },
    { next: ["x", "y"], previous: ["y"], writes: ["/1"] },
    { next: { a: "x" }, previous: undefined, writes: [] },
    { next: { a: "x" }, previous: { b: 1 }, writes: [] },
    // A frozen object (shared by many holders) is left as it is, and never written.
    {
      next: { shared: Object.freeze({ a: "x" }), b: "z" },
      previous: { shared: { a: "x" }, b: "z" },
      writes: ["/b"],
    },
  ])("writes $writes", ({ next, previous, writes }) => {
    const before = JSON.stringify(next);
    const seen: string[] = [];
    keepEqualStrings(recorded(next, seen), previous);
    expect(seen).toEqual(writes);
    expect(JSON.stringify(next)).toBe(before);
  });

  it("keeps an own field named __proto__ a field, and the prototype as it was", () => {
    const next = JSON.parse('{"__proto__":"x","name":"n"}') as Record<string, unknown>;
    keepEqualStrings(next, JSON.parse('{"__proto__":"x","name":"n"}'));
    expect(Object.getPrototypeOf(next)).toBe(Object.prototype);
    expect(JSON.stringify(next)).toBe('{"__proto__":"x","name":"n"}');
  });
});

describe("shareEqualString", () => {
  it.each<{ obj: Record<string, unknown>; out: Record<string, unknown> }>([
    { obj: { latest: "r1", active: "r1" }, out: { latest: "r1", active: "r1" } },
    { obj: { latest: "r2", active: "r1" }, out: { latest: "r2", active: "r1" } },
    { obj: { latest: "r1" }, out: { latest: "r1" } },
    { obj: { active: "r1" }, out: { active: "r1" } },
    { obj: {}, out: {} },
    { obj: { latest: 1, active: 1 }, out: { latest: 1, active: 1 } },
  ])("$obj stays $out, no field added", ({ obj, out }) => {
    shareEqualString(obj, "latest", "active");
    expect(obj).toStrictEqual(out);
    expect(Object.keys(obj)).toEqual(Object.keys(out));
  });
});

describe("shareFrom", () => {
  it.each<{ obj: Record<string, unknown>; sources: unknown[]; out: Record<string, unknown> }>([
    { obj: { image: "a:1" }, sources: [copyOf("a:1")], out: { image: "a:1" } },
    { obj: { image: "a:1" }, sources: [undefined, "b", copyOf("a:1")], out: { image: "a:1" } },
    { obj: { image: "a:1" }, sources: ["a:2"], out: { image: "a:1" } },
    { obj: { image: "a:1" }, sources: [], out: { image: "a:1" } },
    { obj: {}, sources: ["a:1"], out: {} },
    { obj: { image: 1 }, sources: [1], out: { image: 1 } },
  ])("$obj with $sources stays $out, no field added", ({ obj, sources, out }) => {
    shareFrom(obj, "image", sources);
    expect(obj).toStrictEqual(out);
    expect(Object.keys(obj)).toEqual(Object.keys(out));
  });
});

describe("packRecord", () => {
  it.each<{ record: Identified & Record<string, unknown>; keys: string[]; text: string }>([
    { record: { id: "d1", name: "web" }, keys: [], text: "[]" },
    { record: { id: "d1", name: "web", image: "a:1" }, keys: ["image"], text: '["a:1"]' },
    {
      record: { b: 1, id: "d2", a: { id: "inner", name: "kept" }, name: "api" },
      keys: ["b", "a"],
      text: '[1,{"id":"inner","name":"kept"}]',
    },
    { record: { id: "d3", name: "x", list: [1, "two", null] }, keys: ["list"], text: '[[1,"two",null]]' },
    { record: { id: "d4", name: "x", gone: null, kept: 0 }, keys: ["gone", "kept"], text: "[null,0]" },
  ])("$record → $keys $text, and back", ({ record, keys, text }) => {
    const packed = packRecord(record, new Shapes());
    expect(packed).toEqual({ name: record.name, keys, text });
    expect(unpackRecord(record.id, packed)).toStrictEqual(record);
  });

  it("leaves out what JSON leaves out of an object, and comes back as JSON would bring it", () => {
    const record = { id: "d1", name: "web", a: undefined, b: 2, f: () => 1, s: Symbol("x") };
    const packed = packRecord(record, new Shapes());
    expect(packed.keys).toEqual(["b"]);
    expect(unpackRecord(record.id, packed)).toStrictEqual(JSON.parse(JSON.stringify(record)));
  });

  it("keeps an own field named __proto__ a field, not the prototype", () => {
    const record = JSON.parse('{"id":"d1","name":"web","__proto__":{"polluted":true},"x":1}') as Identified;
    const back = unpackRecord<Identified & Record<string, unknown>>(
      record.id,
      packRecord(record, new Shapes()),
    );
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.keys(back)).toEqual(["id", "name", "__proto__", "x"]);
    expect((back as { polluted?: unknown }).polluted).toBeUndefined();
    expect(JSON.stringify(back)).toBe(JSON.stringify(record));
  });

  it("holds the field names once per shape: records with the same fields share one frozen array", () => {
    const shapes = new Shapes();
    const a = packRecord({ id: "1", name: "a", source: "image", status: "READY" }, shapes);
    const b = packRecord({ id: "2", name: "b", source: "github", status: "BUILDING" }, shapes);
    const other = packRecord({ id: "3", name: "c", status: "READY", source: "image" }, shapes);
    const again = packRecord({ id: "4", name: "d", source: "x", status: "y" }, shapes);
    expect(b.keys).toBe(a.keys);
    expect(again.keys).toBe(a.keys);
    expect(other.keys).not.toBe(a.keys);
    expect(other.keys).toEqual(["status", "source"]);
    expect(Object.isFrozen(a.keys)).toBe(true);
    expect(shapes.size).toBe(2);
    // The text holds no field name: a deployment's names are more than a third of its JSON.
    const deployment = {
      id: "7f1d3c1e-0000-4000-8000-000000000001",
      name: "web",
      source: "internal_docker",
      source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
      source_revision_config: { image_uri: "registry.example.com/web:1" },
      secrets: [],
      tenant_id: "5e1a7c3d-0000-4000-8000-00000000d0e5",
      created_at: "2026-11-28T03:16:12.355Z",
      updated_at: "2026-11-28T03:16:12.355Z",
      status: "READY",
      latest_revision_id: "451bf8a3-dfe9-4ec5-a8e8-fa9849a252c5",
      active_revision_id: "451bf8a3-dfe9-4ec5-a8e8-fa9849a252c5",
      secret_references: null,
      image_version: null,
    };
    const { id: _id, name: _name, ...rest } = deployment;
    const packed = packRecord(deployment, shapes);
    expect(packed.text.length).toBeLessThan(JSON.stringify(rest).length * 0.7);
    expect(unpackRecord(deployment.id, packed)).toStrictEqual(deployment);
  });

  it(`holds at most ${SHAPES_KEPT} shapes; a record of a forgotten shape keeps its own and still unpacks`, () => {
    const shapes = new Shapes();
    const first = packRecord({ id: "0", name: "n0", f0: 0 }, shapes);
    for (let i = 1; i <= SHAPES_KEPT * 3; i++) {
      packRecord({ id: String(i), name: `n${i}`, [`f${i}`]: i }, shapes);
      expect(shapes.size).toBeLessThanOrEqual(SHAPES_KEPT);
    }
    expect(unpackRecord("0", first)).toStrictEqual({ id: "0", name: "n0", f0: 0 });
    // The shape was forgotten: held anew (a new array), then shared again through the table.
    const later = packRecord({ id: "9", name: "n9", f0: 9 }, shapes);
    expect(later.keys).not.toBe(first.keys);
    expect(later.keys).toEqual(first.keys);
    packRecord({ id: "10", name: "n10", other: 10 }, shapes);
    expect(packRecord({ id: "11", name: "n11", f0: 11 }, shapes).keys).toBe(later.keys);
  });

  // One name past each bound: a server's record of 100,000 names takes the same branch, and its
  // whole-object comparison below took 0.7 s of CPU (10 s at loads of 13 to 19 on two cores).
  it.each([
    {
      what: `more than ${SHAPE_MAX_KEYS} names`,
      names: Array.from({ length: SHAPE_MAX_KEYS + 1 }, (_, i) => `k${i}`),
    },
    { what: `more than ${SHAPE_MAX_CHARS} characters of names`, names: ["a".repeat(SHAPE_MAX_CHARS), "b"] },
  ])("holds a record with $what as an object's JSON, its shape not kept", ({ names }) => {
    const shapes = new Shapes();
    const record: Identified & Record<string, unknown> = { id: "d1", name: "web" };
    for (const [i, key] of names.entries()) record[key] = i % 3 === 0 ? null : i;
    const packed = packRecord(record, shapes);
    expect(packed.keys).toBeUndefined();
    expect(shapes.size).toBe(0);
    const { id: _id, name: _name, ...rest } = record;
    expect(packed.text).toBe(JSON.stringify(rest));
    expect(unpackRecord(record.id, packed)).toStrictEqual(record);
  });

  it.each([
    { what: `${SHAPE_MAX_KEYS} names`, names: Array.from({ length: SHAPE_MAX_KEYS }, (_, i) => `k${i}`) },
    { what: `${SHAPE_MAX_CHARS} characters of names`, names: ["a".repeat(SHAPE_MAX_CHARS - 1), "b"] },
  ])("shares the shape of a record with $what, the most a shared shape has", ({ names }) => {
    const shapes = new Shapes();
    const record: Identified & Record<string, unknown> = { id: "d1", name: "web" };
    for (const [i, key] of names.entries()) record[key] = i;
    const packed = packRecord(record, shapes);
    expect(packed.keys).toEqual(names);
    expect(shapes.size).toBe(1);
    expect(unpackRecord(record.id, packed)).toStrictEqual(record);
  });

  it("brings the fields back in the order the old whole-object JSON did, integer-like names first", () => {
    const record = JSON.parse(
      '{"z":1,"id":"d1","10":"ten","name":"web","a":{"y":1,"2":2},"1":"one"}',
    ) as Identified;
    const { id, name, ...rest } = record;
    const before = { id, name, ...(JSON.parse(JSON.stringify(rest)) as object) };
    const back = unpackRecord(id, packRecord(record, new Shapes()));
    expect(Object.keys(back)).toEqual(Object.keys(before));
    expect(JSON.stringify(back)).toBe(JSON.stringify(before));
  });
});

describe("packRecord with shared values", () => {
  const deployment = (i: number) => ({
    id: `7f1d3c1e-0000-4000-8000-${String(i).padStart(12, "0")}`,
    name: `web-${i}`,
    source: "internal_docker",
    source_config: { deployment_type: "prod", resource_spec: { min_scale: 1, max_scale: 2 } },
    source_revision_config: { image_uri: `registry.example.com/web-${i}:1` },
    secrets: [],
    tenant_id: "5e1a7c3d-0000-4000-8000-00000000d0e5",
    created_at: `2026-11-28T03:16:${String(i % 60).padStart(2, "0")}.355Z`,
    updated_at: `2026-11-28T03:16:${String(i % 60).padStart(2, "0")}.355Z`,
    status: "READY",
    latest_revision_id: `451bf8a3-dfe9-4ec5-a8e8-${String(i).padStart(12, "0")}`,
    active_revision_id: `451bf8a3-dfe9-4ec5-a8e8-${String(i).padStart(12, "0")}`,
    secret_references: null,
    image_version: null,
  });

  it("holds what many records share once, and what a record repeats once in it", () => {
    const shapes = new Shapes();
    const values = new SharedValues();
    const packed = Array.from({ length: 20 }, (_, i) => packRecord(deployment(i), shapes, values));
    // The source, its configuration and the tenant: shared by every record.
    expect(values.size).toBe(3);
    const last = packed[19] as PackedRecord;
    expect(last.text).not.toContain("5e1a7c3d");
    expect(last.text).not.toContain("resource_spec");
    // The active revision is the latest, the update time the creation time: each held once.
    expect(last.text.match(/451bf8a3/g)).toHaveLength(1);
    expect(last.text.match(/2026-11-28/g)).toHaveLength(1);
    expect(last.text.length).toBeLessThan(packed[0]?.text.length ?? 0);
    for (const [i, p] of packed.entries())
      expect(unpackRecord(deployment(i).id, p, values)).toStrictEqual(deployment(i));
    // A record that refers to the table cannot be read without it.
    expect(() => unpackRecord(deployment(19).id, last)).toThrow(/shared values/);
  });

  it("gives each value its own copy: a change to one leaves the record's other values and the table's", () => {
    const shapes = new Shapes();
    const values = new SharedValues();
    const record = { id: "1", name: "a", x: { deep: [1, 2] }, y: { deep: [1, 2] } };
    for (let i = 0; i < 5; i++) packRecord({ ...record, id: String(i) }, shapes, values);
    const packed = packRecord(record, shapes, values);
    const back = unpackRecord<typeof record>("1", packed, values);
    back.x.deep.push(3);
    expect(back.y.deep).toEqual([1, 2]);
    expect(unpackRecord<typeof record>("1", packed, values).x.deep).toEqual([1, 2]);
  });

  it(`keeps a string that starts with ${REF} as it is, shared or not`, () => {
    const shapes = new Shapes();
    const values = new SharedValues();
    // Short ones are held in the record, longer ones shared, and `d` repeats `a`.
    const odd = { a: `${REF}^0`, b: `${REF}0 and more`, c: `${REF}${REF}x and more`, d: `${REF}^0` };
    const records = Array.from({ length: 6 }, (_, i) => ({ id: String(i), name: `n${i}`, ...odd }));
    for (const r of records)
      expect(unpackRecord(r.id, packRecord(r, shapes, values), values)).toStrictEqual(r);
    expect(values.size).toBeGreaterThan(0);
  });

  it(`holds at most ${SHARED_VALUES_KEPT} values and never forgets one: a record packed early still unpacks`, () => {
    const shapes = new Shapes();
    const values = new SharedValues();
    const early = packRecord({ id: "0", name: "n", v: "value-number-0" }, shapes, values);
    for (let v = 0; v < SHARED_VALUES_KEPT * 2; v++)
      for (let i = 0; i < 5; i++)
        packRecord({ id: `${v}-${i}`, name: "n", v: `value-number-${v}` }, shapes, values);
    expect(values.size).toBe(SHARED_VALUES_KEPT);
    expect(unpackRecord("0", early, values)).toStrictEqual({ id: "0", name: "n", v: "value-number-0" });
    // Past the table's size a value stays in its record.
    const late = packRecord(
      { id: "x", name: "n", v: `value-number-${SHARED_VALUES_KEPT * 2 - 1}` },
      shapes,
      values,
    );
    expect(late.text).toContain("value-number");
  });
});

describe("OneOrMany", () => {
  // Each step adds (`+x`) or removes (`-x`) an item; after all of them the value holds `items`,
  // as the item itself when there is one (`bare`), as a Set from two.
  it.each<{ steps: string[]; items: string[]; bare: boolean }>([
    { steps: [], items: [], bare: false },
    { steps: ["+a"], items: ["a"], bare: true },
    { steps: ["+a", "+a"], items: ["a"], bare: true },
    { steps: ["+a", "+b"], items: ["a", "b"], bare: false },
    { steps: ["+a", "+b", "+a"], items: ["a", "b"], bare: false },
    { steps: ["+a", "+b", "-a"], items: ["b"], bare: true },
    { steps: ["+a", "+b", "+c", "-b"], items: ["a", "c"], bare: false },
    { steps: ["+a", "+b", "-b", "+c"], items: ["a", "c"], bare: false },
    { steps: ["+a", "-a"], items: [], bare: false },
    { steps: ["-a"], items: [], bare: false },
    { steps: ["+a", "-b"], items: ["a"], bare: true },
  ])("$steps holds $items", ({ steps, items, bare }) => {
    let held: OneOrMany<string> | undefined;
    for (const step of steps) {
      const item = step.slice(1);
      held = step.startsWith("+") ? addItem(held, item) : removeItem(held, item);
    }
    expect([...itemsOf(held)]).toEqual(items);
    expect(typeof held === "string").toBe(bare);
    if (items.length === 0) expect(held).toBeUndefined();
  });

  it("adds to the Set it holds rather than making another", () => {
    const held = addItem(addItem(undefined, 1), 2);
    expect(addItem(held, 3)).toBe(held);
    expect(itemsOf(held)).toBe(held);
  });
});
