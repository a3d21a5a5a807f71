/**
 * The Deployment resource's source settings (part of `schema.ts`): `spec.sourceConfig`, whose
 * change needs no new revision, `spec.sourceRevisionConfig`, whose change makes one, and the
 * `spec.github` shorthand for a repository, with the bounds of their strings.
 */
import { Type } from "@sinclair/typebox";
import { KNOWN_DEPLOYMENT_TYPES } from "../api/wire.ts";
import { StringEnum } from "./openapi-types.ts";
import { ResourceSpecSchema } from "./resource-spec-schema.ts";

const Uuid = (description: string) => Type.String({ format: "uuid", maxLength: 36, description });

/** Longest URL (repository, custom URL): what browsers and most proxies accept. */
export const MAX_URL_LENGTH = 2048;
/** Longest install or build command: a longer one belongs in a script of the repository. */
export const MAX_COMMAND_LENGTH = 2048;
/** Longest path of a file in the source (graph configuration, tarball). */
export const MAX_PATH_LENGTH = 1024;
/** Longest image reference: a registry host, a repository path, a tag and a digest. */
export const MAX_IMAGE_LENGTH = 512;
/** Longest git ref: a branch, a tag or a commit (Git's own limit is the file system's, 255). */
export const MAX_REF_LENGTH = 256;

/** `spec.sourceConfig`. */
export const SpecSourceConfigSchema = Type.Object(
  {
    integrationId: Type.Optional(
      Uuid("GitHub integration id (source github). Set by spec.github when that shorthand is used."),
    ),
    repoUrl: Type.Optional(
      Type.String({
        maxLength: MAX_URL_LENGTH,
        description: "Repository URL (source github). Set by spec.github when that shorthand is used.",
      }),
    ),
    buildOnPush: Type.Optional(
      Type.Boolean({ description: "Build a new revision on every push to repoRef." }),
    ),
    customUrl: Type.Optional(
      Type.String({ maxLength: MAX_URL_LENGTH, description: "Custom URL the deployment is served at." }),
    ),
    listenerId: Type.Optional(Uuid("Id of the listener (self-hosted data plane) that runs the deployment.")),
    listenerConfig: Type.Optional(
      Type.Object(
        {
          k8sNamespace: Type.Optional(
            Type.String({ description: "Kubernetes namespace the listener deploys into.", maxLength: 63 }),
          ),
        },
        { description: "Settings for the listener." },
      ),
    ),
    installCommand: Type.Optional(
      Type.String({ maxLength: MAX_COMMAND_LENGTH, description: "Command that installs dependencies." }),
    ),
    buildCommand: Type.Optional(
      Type.String({ maxLength: MAX_COMMAND_LENGTH, description: "Command that builds the application." }),
    ),
    resourceSpec: Type.Optional(ResourceSpecSchema),
    deploymentType: Type.Optional(
      StringEnum(KNOWN_DEPLOYMENT_TYPES, {
        description:
          "The deployment's type on the service, which decides its tier and price: dev_free, dev, prod, dev_zero or dev_free_zero (only the *_zero types scale to zero). Sent on create; the service's default is prod. Cannot change once set: the service fixes a deployment's type at creation. Left out: whatever type the service's deployment has is accepted.",
        "x-kubernetes-validations": [
          {
            rule: "self == oldSelf",
            message:
              "spec.sourceConfig.deploymentType cannot change: the service fixes a deployment's type at creation, so a new type means a new deployment; restore the previous value, or create a new resource (with another spec.name) of the new type",
            reason: "FieldValueForbidden",
          },
        ],
      }),
    ),
  },
  {
    description:
      "Source settings whose change needs no new revision (or that cannot change after creation). Fields left out are not managed.",
  },
);

/** `spec.sourceRevisionConfig`. */
export const SpecSourceRevisionConfigSchema = Type.Object(
  {
    repoRef: Type.Optional(
      Type.String({
        maxLength: MAX_REF_LENGTH,
        description:
          "Git ref (branch, tag or commit) to deploy. With spec.github, defaults to the default branch.",
      }),
    ),
    graphConfigPath: Type.Optional(
      Type.String({ maxLength: MAX_PATH_LENGTH, description: "Path of the graph configuration file." }),
    ),
    imageUri: Type.Optional(
      Type.String({
        maxLength: MAX_IMAGE_LENGTH,
        description: "Image to deploy (docker sources), at most 512 characters.",
      }),
    ),
    sourceTarballPath: Type.Optional(
      Type.String({ maxLength: MAX_PATH_LENGTH, description: "Path of the uploaded source tarball." }),
    ),
  },
  { description: "Source settings whose change creates a new revision. Fields left out are not managed." },
);

/** `spec.github`. */
export const SpecGithubSchema = Type.Object(
  {
    integrationId: Uuid("GitHub integration whose repository listing resolves the repository."),
    repository: Type.String({
      maxLength: 201,
      pattern: "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
      description: "Repository as owner/name.",
    }),
  },
  {
    description:
      "Shorthand for a GitHub repository: the operator resolves sourceConfig.repoUrl and sourceConfig.integrationId, and sourceRevisionConfig.repoRef (the default branch) when unset.",
  },
);
