/**
 * The writes of one connection whose answer was lost (a timeout, a reset connection: the service
 * may have applied them) and that may have made a revision: a PATCH, a redeploy. Each is held as
 * the deployment's latest revision when it was sent and the digest of the config its revision
 * would have; the first new latest revision seen after it, of that config, is the write's own,
 * as the revision a write answered is (`RemoteSnapshot.ownLatest`): `externalRevisionOf` never
 * names it someone else's. A new revision of another config first, or a later write of the
 * deployment answered, ends the record. In memory, as the answers are: a restart forgets them.
 */
import { configAfterPatch, revisionConfigHash } from "../revision-history.ts";
import type { Deployment } from "../service-types.ts";

/** One write whose answer was lost. */
interface Unanswered {
  /** The deployment's latest revision when it was sent. */
  after: string | undefined;
  /** The digest of the config of the revision it would make (`revisionHistory[].configHash`). */
  configHash: string;
  /** The revision seen to be its own, once seen. */
  made?: string;
}

/** Writes held at most: only the window between a lost answer and the next look matters. */
const HELD = 512;

/**
 * See the module comment. A map by deployment id: a write answered deletes its deployment's
 * record (`delete`), and a look asks `madeBy` only where one is held (`has`), so a reconcile that
 * lost no answer pays a map's lookup and never enters this module.
 */
export class UnansweredWrites extends Map<string, Unanswered> {
  /** A write of `deploymentId`, sent while its latest revision was `after`, lost its answer. */
  lost(deploymentId: string, after: string | null | undefined, configHash: string): void {
    this.delete(deploymentId);
    this.set(deploymentId, { after: after ?? undefined, configHash });
    if (this.size > HELD) this.delete(this.keys().next().value ?? "");
  }

  /** `d`'s latest revision when a write whose answer was lost made it, else undefined. */
  madeBy(d: Deployment): string | undefined {
    const sent = this.get(d.id);
    const latest = d.latest_revision_id ?? undefined;
    if (!sent || latest === undefined || latest === sent.after) return undefined;
    if (sent.made === undefined) {
      const config = configAfterPatch(d.source_revision_config, {});
      if (revisionConfigHash(config, d.source) !== sent.configHash) {
        this.delete(d.id);
        return undefined;
      }
      sent.made = latest;
    }
    return sent.made === latest ? latest : undefined;
  }
}
