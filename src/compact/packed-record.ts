/**
 * A record held as JSON text: a listing of 10,000 deployments then costs about its size on the
 * wire, not the several times more of parsed objects. The text leaves out the id and the name,
 * which the holder keeps once anyway (as its key and in its index by name). Imports nothing.
 */

/** What a record needs to be packed: its id and name, kept apart from the text. */
export interface Identified {
  id: string;
  name: string;
}

/** A packed record: its name, and the JSON text of the rest; its id is the holder's key. */
export interface PackedRecord {
  name: string;
  text: string;
}

/** `record` packed (see {@link PackedRecord}); the other fields keep their order in the text. */
export function packRecord<T extends Identified>(record: T): PackedRecord {
  const { id: _id, name, ...rest } = record;
  return { name, text: JSON.stringify(rest) };
}

/** The record `id` that {@link packRecord} packed into `packed`, parsed anew. */
export function unpackRecord<T extends Identified>(id: string, packed: PackedRecord): T {
  return { id, name: packed.name, ...(JSON.parse(packed.text) as Omit<T, "id" | "name">) } as T;
}
