/**
 * What the planner may take as last applied for a resource: one rule for the controller and for
 * `plan`, so that both reach the same decision for the same resource.
 */
import type { DesiredDeployment } from "../../crd/mapping.ts";
import type { DeploymentSpec } from "../../crd/schema.ts";
import type { LastApplied } from "./plan.ts";
import type { SecretDigest } from "./secret-hash.ts";

/**
 * The {@link LastApplied} to plan `desired` against. `appliedSecretsHash` is the resource's
 * `status.appliedSecretsHash` (undefined when unknown). ObserveOnly never sent the secrets, so
 * where the service masks values only their names can be compared: the desired values count as
 * the ones applied. Every other policy uses the recorded hash, if any. `secretDigest` makes and
 * compares the digests (keyed with the install key).
 */
export function lastAppliedFor(
  spec: Pick<DeploymentSpec, "managementPolicy">,
  desired: Pick<DesiredDeployment, "secrets">,
  appliedSecretsHash: string | undefined,
  secretDigest: SecretDigest,
): LastApplied {
  const hash =
    spec.managementPolicy === "ObserveOnly" && desired.secrets
      ? secretDigest.digest(desired.secrets)
      : appliedSecretsHash;
  return hash ? { secretsHash: hash, secretDigest } : { secretDigest };
}
