/**
 * A key of a name within a scope whose common case costs no string: the bare name, which its
 * owner already holds, in the common scope (the default connection's claims: 10,000 resources
 * then cost no claim strings of their own), `<scope>\n<name>` in another. Imports nothing.
 */

/** The key of `name` within `scope`: `name` itself for no scope; a newline joins the two otherwise. */
export function scopedKey(scope: string | undefined, name: string): string {
  return scope === undefined ? name : `${scope}\n${name}`;
}
