"""The Kyverno versions the generated ClusterPolicies work on."""

from __future__ import annotations

from typing import Final

# Why 1.13.0 and not 1.12: Kyverno 1.12 added `spec.webhookConfiguration` with only `matchConditions`
# (kyverno/kyverno#9483, milestone 1.12.0); `webhookConfiguration.failurePolicy` and `.timeoutSeconds`
# replaced the deprecated `spec.failurePolicy` / `spec.webhookTimeoutSeconds` in 1.13.0 (kyverno#10515),
# and the per-rule `generate.generateExisting` the quota policy uses also arrived in 1.13.0 (kyverno#10441).
# The v1.19 CRD marks the old spec-level fields "Deprecated, use ... under webhookConfiguration". On an
# older Kyverno the API server prunes unknown fields without a word, so the policy would silently lose
# its fail-closed scope: the version is a hard floor, written into `policies.kyverno.io/minversion`.
MINIMUM_KYVERNO_VERSION: Final = "1.13.0"
# The other end: kyverno.io/v1 ClusterPolicy is deprecated since Kyverno 1.17 (1.19 prints a deprecation
# warning on every access) and scheduled for removal in 1.20 (kyverno/website#2122), in favour of the CEL
# policy types in policies.kyverno.io. These documents target 1.13 <= Kyverno < 1.20.
# The CEL types (MutatingPolicy, GeneratingPolicy, ValidatingPolicy) are served at policies.kyverno.io/v1 from
# Kyverno 1.17 (the v1.19.0 CRDs serve v1alpha1, v1beta1 and v1, storing v1beta1); `kyverno.policyApi: cel`.
MINIMUM_KYVERNO_VERSION_CEL: Final = "1.17.0"
# The release that removes kyverno.io/v1 ClusterPolicy (announced with 1.17's deprecation; kyverno/website#2122).
# Helm never deletes a CRD, so a cluster upgraded to 1.20 can still serve clusterpolicies.kyverno.io while no
# controller reads it: the policies would be created and never enforced. The preflight reads the running version.
KYVERNO_WITHOUT_CLUSTERPOLICY: Final = "1.20.0"
# How the preflight finds the running Kyverno: its admission controller's Deployment as the kyverno chart renders it
# (charts/kyverno/templates/admission-controller/deployment.yaml and _helpers/_labels.tpl at v1.19.0: component
# label `admission-controller`; container image reg.kyverno.io/kyverno/kyverno:<appVersion> by default).
KYVERNO_ADMISSION_SELECTOR: Final = "app.kubernetes.io/component=admission-controller"
KYVERNO_IMAGE_SUFFIX: Final = "kyverno/kyverno"
