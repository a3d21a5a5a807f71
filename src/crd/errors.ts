/**
 * Errors of the spec-to-wire mapping. The controller branches on them to set a condition
 * reason (SecretNotFound, InvalidSpec); their messages name Secrets, keys and fields, never a
 * secret value.
 */

/** A Secret or key referenced by `spec.secrets[].valueFrom.secretKeyRef`, with what is missing. */
export interface MissingSecretKey {
  /** Name of the Kubernetes Secret. */
  secret: string;
  /** Key in its data. */
  key: string;
  /** The deployment secret (`spec.secrets[].name`) that references it. */
  for: string;
}

/** One or more referenced Secrets or keys could not be read; nothing may be sent. */
export class SecretNotFoundError extends Error {
  override readonly name: string = "SecretNotFoundError";
  /** Every missing reference, in spec order. */
  readonly missing: readonly MissingSecretKey[];
  constructor(missing: readonly MissingSecretKey[]) {
    const list = missing
      .map((m) => `key "${m.key}" of Secret "${m.secret}" (for secret ${m.for})`)
      .join(", ");
    super(`spec.secrets references what does not exist in the resource's namespace: ${list}`);
    this.missing = missing;
  }
}

/** The spec cannot be turned into a request, for a reason the CRD's validation could not catch. */
export class InvalidSpecError extends Error {
  override readonly name: string = "InvalidSpecError";
  /** Spec path of the offending field, e.g. `spec.github.repository`. */
  readonly field: string;
  constructor(field: string, message: string, options?: ErrorOptions) {
    super(`${field}: ${message}`, options);
    this.field = field;
  }
}

/** `spec.github.repository` is not among the repositories its integration lists. */
export class GithubRepositoryNotFoundError extends InvalidSpecError {
  override readonly name: string = "GithubRepositoryNotFoundError";
  readonly repository: string;
  readonly integrationId: string;
  constructor(repository: string, integrationId: string, available: readonly string[]) {
    const shown = available.slice(0, 10).join(", ");
    const more = available.length > 10 ? ` and ${available.length - 10} more` : "";
    const listing = available.length === 0 ? "it lists no repository" : `it lists ${shown}${more}`;
    super(
      "spec.github.repository",
      `repository ${repository} is not reachable through GitHub integration ${integrationId} (${listing}); check the name or grant the integration access to it`,
    );
    this.repository = repository;
    this.integrationId = integrationId;
  }
}
