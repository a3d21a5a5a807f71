/**
 * Kubernetes object names for imported deployments. The service accepts names Kubernetes does
 * not (capitals, underscores, spaces, any length up to its own limit), so `metadata.name` is
 * derived from the service's name, while `spec.name` always keeps the service's name exactly.
 * Pure and deterministic: importing twice gives the same files.
 */
import { createHash } from "node:crypto";

/** Longest Kubernetes object name (a DNS-1123 subdomain). */
export const MAX_OBJECT_NAME = 253;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** True when `name` is a valid Kubernetes object name (DNS-1123 subdomain, at most 253 characters). */
export function isObjectName(name: string): boolean {
  return name.length <= MAX_OBJECT_NAME && DNS_SUBDOMAIN.test(name);
}

const shortHash = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 6);

/**
 * The `metadata.name` for a service deployment named `serviceName`, optionally with `suffix`
 * (e.g. `-secrets`).
 *
 * Contract: when `serviceName + suffix` is already a valid object name it is used unchanged.
 * Otherwise the name is lower-cased, every run of other characters becomes `-`, it is trimmed
 * and shortened to fit, and `-<6 hex of sha256(serviceName)>` is appended, so two service names
 * that sanitize alike (`My_Agent`, `my-agent`) never share an object name. A name with nothing
 * usable left becomes `deployment-<hash>`.
 */
export function objectNameFor(serviceName: string, suffix = ""): string {
  const plain = `${serviceName}${suffix}`;
  if (isObjectName(plain)) return plain;
  const tail = `-${shortHash(serviceName)}${suffix}`;
  const base = serviceName
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, MAX_OBJECT_NAME - tail.length)
    .replace(/^-+|-+$/g, "");
  return `${base || "deployment"}${tail}`;
}
