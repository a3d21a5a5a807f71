/**
 * The tracing projects the real service keeps after a deployment is deleted without
 * `delete_tracing_project=true`: it creates one of the same name with every deployment, and a
 * later create of that name answers 409 until someone deletes the project in its UI.
 *
 * Off by default (the simulator stays the spec's double, and tests delete and re-create names
 * freely): switched on by the option `keepTracingProjects`, the flag `--keep-tracing-projects`,
 * the seed's `tracingProjects`, or `PUT /_sim/tracing-projects`.
 */

/** The names of the tracing projects left behind, and whether deletes leave them. */
export class TracingProjects {
  /** Whether a DELETE without `delete_tracing_project=true` leaves the tracing project behind. */
  keep: boolean;
  readonly #names = new Set<string>();

  constructor(keep = false, names: readonly string[] = []) {
    this.keep = keep;
    for (const name of names) this.#names.add(name);
  }

  /** Whether a tracing project named `name` remains (a create of it answers 409). */
  has(name: string): boolean {
    return this.#names.has(name);
  }

  /**
   * The deployment `name` was deleted: its tracing project goes with it when asked to
   * (`deleteTracingProject`), and stays behind otherwise while {@link keep} is on.
   */
  deleted(name: string, deleteTracingProject: boolean): void {
    if (deleteTracingProject) this.#names.delete(name);
    else if (this.keep) this.#names.add(name);
  }

  /** Deletes the tracing project `name`, as a person would in the service's UI; false when there is none. */
  remove(name: string): boolean {
    return this.#names.delete(name);
  }

  /** The names, sorted. */
  list(): string[] {
    return [...this.#names].sort();
  }
}

/** The detail of the 409 a create of a name held by a tracing project answers. */
export function tracingProjectConflict(name: string): string {
  return `A tracing project named '${name}' already exists: delete the tracing project, or choose another deployment name`;
}
