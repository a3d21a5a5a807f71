/**
 * What the planner may take as last applied for a resource: one rule for the controller and for
 * `plan`, so that both reach the same decision for the same resource.
 */
import type { DesiredDeployment } from "../../crd/mapping.ts";
import type { DeploymentSpec } from "../../crd/schema.ts";
import type { LastApplied } from "./plan.ts";
import { hashSecrets } from "./secret-hash.ts";

/**
 * The {@link LastApplied} to plan `desired` against. `appliedSecretsHash` is the resource's
 * `status.appliedSecretsHash` (undefined when unknown). ObserveOnly never sent the secrets, so
 * where the service masks values only their names can be compared: the desired values count as
 * the ones applied. Every other policy uses the recorded hash, if any.
 */
export function lastAppliedFor(
  spec: Pick<DeploymentSpec, "managementPolicy">,
  desired: Pick<DesiredDeployment, "secrets">,
  appliedSecretsHash: string | undefined,
): LastApplied {
  const hash =
    spec.managementPolicy === "ObserveOnly" && desired.secrets
      ? hashSecrets(desired.secrets)
      : appliedSecretsHash;
  return hash ? { secretsHash: hash } : {};
}
