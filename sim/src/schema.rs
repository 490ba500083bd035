//! The protobuf layouts of the kinds the built-in upstream serves, and an
//! encoder from their JSON: what Go's generated marshallers write for
//! Kubernetes v1.21 (the apiserver of reference 12; with `subresource` of
//! managed fields, from v1.22): fields in number order,
//! every non-pointer field written even when empty (`""`, `0`, `false`, an
//! empty message), pointer fields and empty repeated fields and maps left
//! out, map entries sorted by key with key and value always written.
//!
//! The schema is a table, one line per message type: `json-name number
//! type`, where type is `s` (string), `i` (integer), `b` (bool), `t` (Time),
//! `q` (Quantity), `ios` (IntOrString), `f` (FieldsV1), `m` (map of strings),
//! `mq` (map of Quantities), `mb` (map of base64 bytes) or a message name;
//! `*` before it marks a pointer (written only when present), `[]` a
//! repeated field. A name of `-` is an embedded Go struct whose JSON fields
//! sit inline in the parent's. JSON fields the table does not know are left
//! out, as the apiserver would have pruned them when they were written.
//! The approximations: a CustomResourceDefinition's versions leave out
//! their `schema` (JSONSchemaProps, a recursive message the table does not
//! hold) and additional printer columns; the workload kinds (replica sets,
//! stateful sets, daemon sets, jobs, cron jobs; layouts of Kubernetes
//! 1.36's `apps/v1` and `batch/v1`) and the cluster kinds (`rbac/v1`,
//! `coordination/v1`, `storage/v1`, `networking/v1`, `flowcontrol/v1`) leave out what the sim
//! never seeds (volume claim templates, ordinals, job failure and success
//! policies, network policies' rules, storage classes' topologies, volume
//! sources but a host path, claims' data sources, ingresses' resource
//! backends, autoscalers' metrics but resource ones, their behavior and
//! conditions).

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::BytesMut;
use serde_json::Value;

use r8s::codec::protobuf::{bytes_field, varint_field};

const SCHEMA: &str = "
ObjectMeta: name 1 s; generateName 2 s; namespace 3 s; selfLink 4 s; uid 5 s; resourceVersion 6 s; generation 7 i; creationTimestamp 8 t; deletionTimestamp 9 *t; deletionGracePeriodSeconds 10 *i; labels 11 m; annotations 12 m; ownerReferences 13 []OwnerReference; finalizers 14 []s; clusterName 15 s; managedFields 17 []ManagedFieldsEntry
OwnerReference: kind 1 s; name 3 s; uid 4 s; apiVersion 5 s; controller 6 *b; blockOwnerDeletion 7 *b
ManagedFieldsEntry: manager 1 s; operation 2 s; apiVersion 3 s; time 4 *t; fieldsType 6 s; fieldsV1 7 *f; subresource 8 s
LabelSelector: matchLabels 1 m; matchExpressions 2 []LabelSelectorRequirement
LabelSelectorRequirement: key 1 s; operator 2 s; values 3 []s
Condition: type 1 s; status 2 s; observedGeneration 3 i; lastTransitionTime 4 t; reason 5 s; message 6 s
Pod: metadata 1 ObjectMeta; spec 2 PodSpec; status 3 PodStatus
PodSpec: volumes 1 []Volume; containers 2 []Container; restartPolicy 3 s; terminationGracePeriodSeconds 4 *i; activeDeadlineSeconds 5 *i; dnsPolicy 6 s; nodeSelector 7 m; serviceAccountName 8 s; serviceAccount 9 s; nodeName 10 s; hostNetwork 11 b; hostPID 12 b; hostIPC 13 b; securityContext 14 *PodSecurityContext; imagePullSecrets 15 []LocalObjectReference; hostname 16 s; subdomain 17 s; schedulerName 19 s; initContainers 20 []Container; automountServiceAccountToken 21 *b; tolerations 22 []Toleration; hostAliases 23 []HostAlias; priorityClassName 24 s; priority 25 *i; shareProcessNamespace 27 *b; readinessGates 28 []PodReadinessGate; runtimeClassName 29 *s; enableServiceLinks 30 *b; preemptionPolicy 31 *s; overhead 32 mq; setHostnameAsFQDN 35 *b
PodSecurityContext: runAsUser 2 *i; runAsNonRoot 3 *b; supplementalGroups 4 []i; fsGroup 5 *i; runAsGroup 6 *i; fsGroupChangePolicy 9 *s; seccompProfile 10 *SeccompProfile
SeccompProfile: type 1 s; localhostProfile 2 *s
LocalObjectReference: name 1 s
HostAlias: ip 1 s; hostnames 2 []s
PodReadinessGate: conditionType 1 s
Toleration: key 1 s; operator 2 s; value 3 s; effect 4 s; tolerationSeconds 5 *i
Volume: name 1 s; - 2 VolumeSource
VolumeSource: hostPath 1 *HostPathVolumeSource; emptyDir 2 *EmptyDirVolumeSource; secret 6 *SecretVolumeSource; persistentVolumeClaim 10 *PersistentVolumeClaimVolumeSource; configMap 19 *ConfigMapVolumeSource; projected 26 *ProjectedVolumeSource
ProjectedVolumeSource: sources 1 []VolumeProjection; defaultMode 2 *i
VolumeProjection: secret 1 *SecretProjection; downwardAPI 2 *DownwardAPIProjection; configMap 3 *ConfigMapProjection; serviceAccountToken 4 *ServiceAccountTokenProjection
SecretProjection: - 1 LocalObjectReference; items 2 []KeyToPath; optional 4 *b
ConfigMapProjection: - 1 LocalObjectReference; items 2 []KeyToPath; optional 4 *b
DownwardAPIProjection: items 1 []DownwardAPIVolumeFile
DownwardAPIVolumeFile: path 1 s; fieldRef 2 *ObjectFieldSelector; mode 4 *i
ServiceAccountTokenProjection: audience 1 s; expirationSeconds 2 *i; path 3 s
HostPathVolumeSource: path 1 s; type 2 *s
EmptyDirVolumeSource: medium 1 s; sizeLimit 2 *q
SecretVolumeSource: secretName 1 s; items 2 []KeyToPath; defaultMode 3 *i; optional 4 *b
ConfigMapVolumeSource: - 1 LocalObjectReference; items 2 []KeyToPath; defaultMode 3 *i; optional 4 *b
PersistentVolumeClaimVolumeSource: claimName 1 s; readOnly 2 b
KeyToPath: key 1 s; path 2 s; mode 3 *i
Container: name 1 s; image 2 s; command 3 []s; args 4 []s; workingDir 5 s; ports 6 []ContainerPort; env 7 []EnvVar; resources 8 ResourceRequirements; volumeMounts 9 []VolumeMount; livenessProbe 10 *Probe; readinessProbe 11 *Probe; terminationMessagePath 13 s; imagePullPolicy 14 s; securityContext 15 *SecurityContext; stdin 16 b; stdinOnce 17 b; tty 18 b; envFrom 19 []EnvFromSource; terminationMessagePolicy 20 s; startupProbe 22 *Probe
ContainerPort: name 1 s; hostPort 2 i; containerPort 3 i; protocol 4 s; hostIP 5 s
EnvVar: name 1 s; value 2 s; valueFrom 3 *EnvVarSource
EnvVarSource: fieldRef 1 *ObjectFieldSelector; configMapKeyRef 3 *ConfigMapKeySelector; secretKeyRef 4 *SecretKeySelector
ObjectFieldSelector: apiVersion 1 s; fieldPath 2 s
ConfigMapKeySelector: - 1 LocalObjectReference; key 2 s; optional 3 *b
SecretKeySelector: - 1 LocalObjectReference; key 2 s; optional 3 *b
EnvFromSource: prefix 1 s; configMapRef 2 *ConfigMapEnvSource; secretRef 3 *SecretEnvSource
ConfigMapEnvSource: - 1 LocalObjectReference; optional 2 *b
SecretEnvSource: - 1 LocalObjectReference; optional 2 *b
ResourceRequirements: limits 1 mq; requests 2 mq
VolumeMount: name 1 s; readOnly 2 b; mountPath 3 s; subPath 4 s; mountPropagation 5 *s; subPathExpr 6 s
Probe: - 1 Handler; initialDelaySeconds 2 i; timeoutSeconds 3 i; periodSeconds 4 i; successThreshold 5 i; failureThreshold 6 i; terminationGracePeriodSeconds 7 *i
Handler: exec 1 *ExecAction; httpGet 2 *HTTPGetAction; tcpSocket 3 *TCPSocketAction
ExecAction: command 1 []s
HTTPGetAction: path 1 s; port 2 ios; host 3 s; scheme 4 s; httpHeaders 5 []HTTPHeader
HTTPHeader: name 1 s; value 2 s
TCPSocketAction: port 1 ios; host 2 s
SecurityContext: capabilities 1 *Capabilities; privileged 2 *b; runAsUser 4 *i; runAsNonRoot 5 *b; readOnlyRootFilesystem 6 *b; allowPrivilegeEscalation 7 *b; runAsGroup 8 *i; procMount 9 *s; seccompProfile 11 *SeccompProfile
Capabilities: add 1 []s; drop 2 []s
PodStatus: phase 1 s; conditions 2 []PodCondition; message 3 s; reason 4 s; hostIP 5 s; podIP 6 s; startTime 7 *t; containerStatuses 8 []ContainerStatus; qosClass 9 s; initContainerStatuses 10 []ContainerStatus; nominatedNodeName 11 s; podIPs 12 []PodIP
PodCondition: type 1 s; status 2 s; lastProbeTime 3 t; lastTransitionTime 4 t; reason 5 s; message 6 s
PodIP: ip 1 s
ContainerStatus: name 1 s; state 2 ContainerState; lastState 3 ContainerState; ready 4 b; restartCount 5 i; image 6 s; imageID 7 s; containerID 8 s; started 9 *b
ContainerState: waiting 1 *ContainerStateWaiting; running 2 *ContainerStateRunning; terminated 3 *ContainerStateTerminated
ContainerStateWaiting: reason 1 s; message 2 s
ContainerStateRunning: startedAt 1 t
ContainerStateTerminated: exitCode 1 i; signal 2 i; reason 3 s; message 4 s; startedAt 5 t; finishedAt 6 t; containerID 7 s
ConfigMap: metadata 1 ObjectMeta; data 2 m; binaryData 3 mb; immutable 4 *b
Secret: metadata 1 ObjectMeta; data 2 mb; type 3 s; stringData 4 m; immutable 5 *b
Namespace: metadata 1 ObjectMeta; spec 2 NamespaceSpec; status 3 NamespaceStatus
NamespaceSpec: finalizers 1 []s
NamespaceStatus: phase 1 s; conditions 2 []NamespaceCondition
NamespaceCondition: type 1 s; status 2 s; lastTransitionTime 4 t; reason 5 s; message 6 s
Node: metadata 1 ObjectMeta; spec 2 NodeSpec; status 3 NodeStatus
NodeSpec: podCIDR 1 s; providerID 3 s; unschedulable 4 b; taints 5 []Taint; externalID 7 s; podCIDRs 8 []s
Taint: key 1 s; value 2 s; effect 3 s; timeAdded 4 *t
NodeStatus: capacity 1 mq; allocatable 2 mq; phase 3 s; conditions 4 []NodeCondition; addresses 5 []NodeAddress; daemonEndpoints 6 NodeDaemonEndpoints; nodeInfo 7 NodeSystemInfo; images 8 []ContainerImage; volumesInUse 9 []s
NodeCondition: type 1 s; status 2 s; lastHeartbeatTime 3 t; lastTransitionTime 4 t; reason 5 s; message 6 s
NodeAddress: type 1 s; address 2 s
NodeDaemonEndpoints: kubeletEndpoint 1 DaemonEndpoint
DaemonEndpoint: Port 1 i
NodeSystemInfo: machineID 1 s; systemUUID 2 s; bootID 3 s; kernelVersion 4 s; osImage 5 s; containerRuntimeVersion 6 s; kubeletVersion 7 s; kubeProxyVersion 8 s; operatingSystem 9 s; architecture 10 s
ContainerImage: names 1 []s; sizeBytes 2 i
Service: metadata 1 ObjectMeta; spec 2 ServiceSpec; status 3 ServiceStatus
ServiceSpec: ports 1 []ServicePort; selector 2 m; clusterIP 3 s; type 4 s; externalIPs 5 []s; sessionAffinity 7 s; loadBalancerIP 8 s; loadBalancerSourceRanges 9 []s; externalName 10 s; externalTrafficPolicy 11 s; healthCheckNodePort 12 i; publishNotReadyAddresses 13 b; topologyKeys 16 []s; ipFamilyPolicy 17 *s; clusterIPs 18 []s; ipFamilies 19 []s; allocateLoadBalancerNodePorts 20 *b; loadBalancerClass 21 *s; internalTrafficPolicy 22 *s
ServicePort: name 1 s; protocol 2 s; port 3 i; targetPort 4 ios; nodePort 5 i; appProtocol 6 *s
ServiceStatus: loadBalancer 1 LoadBalancerStatus; conditions 2 []Condition
LoadBalancerStatus: ingress 1 []LoadBalancerIngress
LoadBalancerIngress: ip 1 s; hostname 2 s
Endpoints: metadata 1 ObjectMeta; subsets 2 []EndpointSubset
EndpointSubset: addresses 1 []EndpointAddress; notReadyAddresses 2 []EndpointAddress; ports 3 []EndpointPort
EndpointAddress: ip 1 s; targetRef 2 *ObjectReference; hostname 3 s; nodeName 4 *s
EndpointPort: name 1 s; port 2 i; protocol 3 s; appProtocol 4 *s
ObjectReference: kind 1 s; namespace 2 s; name 3 s; uid 4 s; apiVersion 5 s; resourceVersion 6 s; fieldPath 7 s
Event: metadata 1 ObjectMeta; involvedObject 2 ObjectReference; reason 3 s; message 4 s; source 5 EventSource; firstTimestamp 6 t; lastTimestamp 7 t; count 8 i; type 9 s; eventTime 10 t; action 12 s; related 13 *ObjectReference; reportingComponent 14 s; reportingInstance 15 s
EventSource: component 1 s; host 2 s
Deployment: metadata 1 ObjectMeta; spec 2 DeploymentSpec; status 3 DeploymentStatus
CustomResourceDefinition: metadata 1 ObjectMeta; spec 2 CustomResourceDefinitionSpec; status 3 CustomResourceDefinitionStatus
CustomResourceDefinitionSpec: group 1 s; names 3 CustomResourceDefinitionNames; scope 4 s; versions 7 []CustomResourceDefinitionVersion; conversion 9 *CustomResourceConversion; preserveUnknownFields 10 b
CustomResourceDefinitionNames: plural 1 s; singular 2 s; shortNames 3 []s; kind 4 s; listKind 5 s; categories 6 []s
CustomResourceDefinitionVersion: name 1 s; served 2 b; storage 3 b; subresources 5 *CustomResourceSubresources; deprecated 7 b; deprecationWarning 8 *s
CustomResourceSubresources: status 1 *CustomResourceSubresourceStatus
CustomResourceSubresourceStatus: 
CustomResourceConversion: strategy 1 s
CustomResourceDefinitionStatus: conditions 1 []CustomResourceDefinitionCondition; acceptedNames 2 CustomResourceDefinitionNames; storedVersions 3 []s
CustomResourceDefinitionCondition: type 1 s; status 2 s; lastTransitionTime 3 t; reason 4 s; message 5 s
DeploymentSpec: replicas 1 *i; selector 2 *LabelSelector; template 3 PodTemplateSpec; strategy 4 DeploymentStrategy; minReadySeconds 5 i; revisionHistoryLimit 6 *i; paused 7 b; progressDeadlineSeconds 9 *i
PodTemplateSpec: metadata 1 ObjectMeta; spec 2 PodSpec
DeploymentStrategy: type 1 s; rollingUpdate 2 *RollingUpdateDeployment
RollingUpdateDeployment: maxUnavailable 1 *ios; maxSurge 2 *ios
DeploymentStatus: observedGeneration 1 i; replicas 2 i; updatedReplicas 3 i; availableReplicas 4 i; unavailableReplicas 5 i; conditions 6 []DeploymentCondition; readyReplicas 7 i; collisionCount 8 *i
DeploymentCondition: type 1 s; status 2 s; reason 4 s; message 5 s; lastUpdateTime 6 t; lastTransitionTime 7 t
ReplicaSet: metadata 1 ObjectMeta; spec 2 ReplicaSetSpec; status 3 ReplicaSetStatus
ReplicaSetSpec: replicas 1 *i; selector 2 *LabelSelector; template 3 PodTemplateSpec; minReadySeconds 4 i
ReplicaSetStatus: replicas 1 i; fullyLabeledReplicas 2 i; observedGeneration 3 i; readyReplicas 4 i; availableReplicas 5 i; conditions 6 []AppsCondition; terminatingReplicas 7 *i
AppsCondition: type 1 s; status 2 s; lastTransitionTime 3 t; reason 4 s; message 5 s
StatefulSet: metadata 1 ObjectMeta; spec 2 StatefulSetSpec; status 3 StatefulSetStatus
StatefulSetSpec: replicas 1 *i; selector 2 *LabelSelector; template 3 PodTemplateSpec; serviceName 5 s; podManagementPolicy 6 s; updateStrategy 7 StatefulSetUpdateStrategy; revisionHistoryLimit 8 *i; minReadySeconds 9 i; persistentVolumeClaimRetentionPolicy 10 *StatefulSetPersistentVolumeClaimRetentionPolicy
StatefulSetUpdateStrategy: type 1 s; rollingUpdate 2 *RollingUpdateStatefulSetStrategy
RollingUpdateStatefulSetStrategy: partition 1 *i; maxUnavailable 2 *ios
StatefulSetPersistentVolumeClaimRetentionPolicy: whenDeleted 1 s; whenScaled 2 s
StatefulSetStatus: observedGeneration 1 i; replicas 2 i; readyReplicas 3 i; currentReplicas 4 i; updatedReplicas 5 i; currentRevision 6 s; updateRevision 7 s; collisionCount 9 *i; conditions 10 []AppsCondition; availableReplicas 11 i
DaemonSet: metadata 1 ObjectMeta; spec 2 DaemonSetSpec; status 3 DaemonSetStatus
DaemonSetSpec: selector 1 *LabelSelector; template 2 PodTemplateSpec; updateStrategy 3 DaemonSetUpdateStrategy; minReadySeconds 4 i; revisionHistoryLimit 6 *i
DaemonSetUpdateStrategy: type 1 s; rollingUpdate 2 *RollingUpdateDaemonSet
RollingUpdateDaemonSet: maxUnavailable 1 *ios; maxSurge 2 *ios
DaemonSetStatus: currentNumberScheduled 1 i; numberMisscheduled 2 i; desiredNumberScheduled 3 i; numberReady 4 i; observedGeneration 5 i; updatedNumberScheduled 6 i; numberAvailable 7 i; numberUnavailable 8 i; collisionCount 9 *i; conditions 10 []AppsCondition
Job: metadata 1 ObjectMeta; spec 2 JobSpec; status 3 JobStatus
JobSpec: parallelism 1 *i; completions 2 *i; activeDeadlineSeconds 3 *i; selector 4 *LabelSelector; manualSelector 5 *b; template 6 PodTemplateSpec; backoffLimit 7 *i; ttlSecondsAfterFinished 8 *i; completionMode 9 *s; suspend 10 *b; podReplacementPolicy 14 *s; managedBy 15 *s
JobStatus: conditions 1 []JobCondition; startTime 2 *t; completionTime 3 *t; active 4 i; succeeded 5 i; failed 6 i; completedIndexes 7 s; ready 9 *i; terminating 11 *i
JobCondition: type 1 s; status 2 s; lastProbeTime 3 t; lastTransitionTime 4 t; reason 5 s; message 6 s
CronJob: metadata 1 ObjectMeta; spec 2 CronJobSpec; status 3 CronJobStatus
CronJobSpec: schedule 1 s; startingDeadlineSeconds 2 *i; concurrencyPolicy 3 s; suspend 4 *b; jobTemplate 5 JobTemplateSpec; successfulJobsHistoryLimit 6 *i; failedJobsHistoryLimit 7 *i; timeZone 8 *s
JobTemplateSpec: metadata 1 ObjectMeta; spec 2 JobSpec
CronJobStatus: active 1 []ObjectReference; lastScheduleTime 4 *t; lastSuccessfulTime 5 *t
Role: metadata 1 ObjectMeta; rules 2 []PolicyRule
ClusterRole: metadata 1 ObjectMeta; rules 2 []PolicyRule; aggregationRule 3 *AggregationRule
PolicyRule: verbs 1 []s; apiGroups 2 []s; resources 3 []s; resourceNames 4 []s; nonResourceURLs 5 []s
AggregationRule: clusterRoleSelectors 1 []LabelSelector
RoleBinding: metadata 1 ObjectMeta; subjects 2 []Subject; roleRef 3 RoleRef
ClusterRoleBinding: metadata 1 ObjectMeta; subjects 2 []Subject; roleRef 3 RoleRef
Subject: kind 1 s; apiGroup 2 s; name 3 s; namespace 4 s
RoleRef: apiGroup 1 s; kind 2 s; name 3 s
Lease: metadata 1 ObjectMeta; spec 2 LeaseSpec
LeaseSpec: holderIdentity 1 *s; leaseDurationSeconds 2 *i; acquireTime 3 *t; renewTime 4 *t; leaseTransitions 5 *i; strategy 6 *s; preferredHolder 7 *s
StorageClass: metadata 1 ObjectMeta; provisioner 2 s; parameters 3 m; reclaimPolicy 4 *s; mountOptions 5 []s; allowVolumeExpansion 6 *b; volumeBindingMode 7 *s
NetworkPolicy: metadata 1 ObjectMeta; spec 2 NetworkPolicySpec
NetworkPolicySpec: podSelector 1 LabelSelector; policyTypes 4 []s
PersistentVolume: metadata 1 ObjectMeta; spec 2 PersistentVolumeSpec; status 3 PersistentVolumeStatus
PersistentVolumeSpec: capacity 1 mq; - 2 PersistentVolumeSource; accessModes 3 []s; claimRef 4 *ObjectReference; persistentVolumeReclaimPolicy 5 s; storageClassName 6 s; mountOptions 7 []s; volumeMode 8 *s; volumeAttributesClassName 10 *s
PersistentVolumeSource: hostPath 3 *HostPathVolumeSource
PersistentVolumeStatus: phase 1 s; message 2 s; reason 3 s; lastPhaseTransitionTime 4 *t
PersistentVolumeClaim: metadata 1 ObjectMeta; spec 2 PersistentVolumeClaimSpec; status 3 PersistentVolumeClaimStatus
PersistentVolumeClaimSpec: accessModes 1 []s; resources 2 VolumeResourceRequirements; volumeName 3 s; selector 4 *LabelSelector; storageClassName 5 *s; volumeMode 6 *s; volumeAttributesClassName 9 *s
VolumeResourceRequirements: limits 1 mq; requests 2 mq
PersistentVolumeClaimStatus: phase 1 s; accessModes 2 []s; capacity 3 mq
PodDisruptionBudget: metadata 1 ObjectMeta; spec 2 PodDisruptionBudgetSpec; status 3 PodDisruptionBudgetStatus
PodDisruptionBudgetSpec: minAvailable 1 *ios; selector 2 *LabelSelector; maxUnavailable 3 *ios; unhealthyPodEvictionPolicy 4 *s
PodDisruptionBudgetStatus: observedGeneration 1 i; disruptionsAllowed 3 i; currentHealthy 4 i; desiredHealthy 5 i; expectedPods 6 i; conditions 7 []Condition
Ingress: metadata 1 ObjectMeta; spec 2 IngressSpec; status 3 IngressStatus
IngressSpec: defaultBackend 1 *IngressBackend; tls 2 []IngressTLS; rules 3 []IngressRule; ingressClassName 4 *s
IngressRule: host 1 s; - 2 IngressRuleValue
IngressRuleValue: http 1 *HTTPIngressRuleValue
HTTPIngressRuleValue: paths 1 []HTTPIngressPath
HTTPIngressPath: path 1 s; backend 2 IngressBackend; pathType 3 *s
IngressBackend: service 4 *IngressServiceBackend
IngressServiceBackend: name 1 s; port 2 ServiceBackendPort
ServiceBackendPort: name 1 s; number 2 i
IngressTLS: hosts 1 []s; secretName 2 s
IngressStatus: loadBalancer 1 IngressLoadBalancerStatus
IngressLoadBalancerStatus: ingress 1 []IngressLoadBalancerIngress
IngressLoadBalancerIngress: ip 1 s; hostname 2 s
EndpointSlice: metadata 1 ObjectMeta; endpoints 2 []Endpoint; ports 3 []EndpointSlicePort; addressType 4 s
Endpoint: addresses 1 []s; conditions 2 EndpointConditions; hostname 3 *s; targetRef 4 *ObjectReference; nodeName 6 *s; zone 7 *s
EndpointConditions: ready 1 *b; serving 2 *b; terminating 3 *b
EndpointSlicePort: name 1 *s; protocol 2 *s; port 3 *i; appProtocol 4 *s
HorizontalPodAutoscaler: metadata 1 ObjectMeta; spec 2 HorizontalPodAutoscalerSpec; status 3 HorizontalPodAutoscalerStatus
HorizontalPodAutoscalerSpec: scaleTargetRef 1 CrossVersionObjectReference; minReplicas 2 *i; maxReplicas 3 i; metrics 4 []MetricSpec
CrossVersionObjectReference: kind 1 s; name 2 s; apiVersion 3 s
MetricSpec: type 1 s; resource 4 *ResourceMetricSource
ResourceMetricSource: name 1 s; target 2 MetricTarget
MetricTarget: type 1 s; value 2 *q; averageValue 3 *q; averageUtilization 4 *i
HorizontalPodAutoscalerStatus: observedGeneration 1 *i; lastScaleTime 2 *t; currentReplicas 3 i; desiredReplicas 4 i; currentMetrics 5 []MetricStatus
MetricStatus: type 1 s; resource 4 *ResourceMetricStatus
ResourceMetricStatus: name 1 s; current 2 MetricValueStatus
MetricValueStatus: value 1 *q; averageValue 2 *q; averageUtilization 3 *i
ServiceAccount: metadata 1 ObjectMeta; secrets 2 []ObjectReference; imagePullSecrets 3 []LocalObjectReference; automountServiceAccountToken 4 *b
FlowSchema: metadata 1 ObjectMeta; spec 2 FlowSchemaSpec; status 3 FlowSchemaStatus
FlowSchemaSpec: priorityLevelConfiguration 1 PriorityLevelConfigurationReference; matchingPrecedence 2 i; distinguisherMethod 3 *FlowDistinguisherMethod; rules 4 []PolicyRulesWithSubjects
PriorityLevelConfigurationReference: name 1 s
FlowDistinguisherMethod: type 1 s
PolicyRulesWithSubjects: subjects 1 []Subject; resourceRules 2 []ResourcePolicyRule; nonResourceRules 3 []NonResourcePolicyRule
Subject: kind 1 s; user 2 *UserSubject; group 3 *GroupSubject; serviceAccount 4 *ServiceAccountSubject
UserSubject: name 1 s
GroupSubject: name 1 s
ServiceAccountSubject: namespace 1 s; name 2 s
ResourcePolicyRule: verbs 1 []s; apiGroups 2 []s; resources 3 []s; clusterScope 4 b; namespaces 5 []s
NonResourcePolicyRule: verbs 1 []s; nonResourceURLs 6 []s
FlowSchemaStatus: conditions 1 []FlowControlCondition
FlowControlCondition: type 1 s; status 2 s; lastTransitionTime 3 t; reason 4 s; message 5 s
PriorityLevelConfiguration: metadata 1 ObjectMeta; spec 2 PriorityLevelConfigurationSpec; status 3 PriorityLevelConfigurationStatus
PriorityLevelConfigurationSpec: type 1 s; limited 2 *LimitedPriorityLevelConfiguration; exempt 3 *ExemptPriorityLevelConfiguration
LimitedPriorityLevelConfiguration: nominalConcurrencyShares 1 *i; limitResponse 2 LimitResponse; lendablePercent 3 *i; borrowingLimitPercent 4 *i
LimitResponse: type 1 s; queuing 2 *QueuingConfiguration
QueuingConfiguration: queues 1 i; handSize 2 i; queueLengthLimit 3 i
ExemptPriorityLevelConfiguration: nominalConcurrencyShares 1 *i; lendablePercent 2 *i
PriorityLevelConfigurationStatus: conditions 1 []FlowControlCondition
";

/// What a field holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Type {
    Str,
    Int,
    Bool,
    Time,
    Quantity,
    IntOrString,
    FieldsV1,
    Map,
    QuantityMap,
    BytesMap,
    Message(&'static str),
}

/// One field of a message type.
#[derive(Debug)]
struct FieldDef {
    json: &'static str,
    number: u32,
    ty: Type,
    pointer: bool,
    repeated: bool,
}

type Schema = HashMap<&'static str, Vec<FieldDef>>;

static TYPES: LazyLock<Schema> = LazyLock::new(|| {
    let mut out = HashMap::new();
    for line in SCHEMA.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, fields) = line.split_once(':').expect("schema line `Type: fields`");
        // A message without fields (a marker, as a CRD's status subresource).
        let mut defs: Vec<FieldDef> = Some(fields.trim())
            .filter(|f| !f.is_empty())
            .into_iter()
            .flat_map(|f| f.split("; "))
            .map(|f| {
                let mut parts = f.split(' ');
                let (json, number, ty) = (
                    parts.next().expect("field name"),
                    parts.next().expect("field number"),
                    parts.next().expect("field type"),
                );
                let (pointer, ty) = ty.strip_prefix('*').map_or((false, ty), |t| (true, t));
                let (repeated, ty) = ty.strip_prefix("[]").map_or((false, ty), |t| (true, t));
                let ty = match ty {
                    "s" => Type::Str,
                    "i" => Type::Int,
                    "b" => Type::Bool,
                    "t" => Type::Time,
                    "q" => Type::Quantity,
                    "ios" => Type::IntOrString,
                    "f" => Type::FieldsV1,
                    "m" => Type::Map,
                    "mq" => Type::QuantityMap,
                    "mb" => Type::BytesMap,
                    msg => Type::Message(msg),
                };
                FieldDef {
                    json,
                    number: number.parse().expect("field number"),
                    ty,
                    pointer,
                    repeated,
                }
            })
            .collect();
        defs.sort_by_key(|d| d.number);
        out.insert(name, defs);
    }
    out
});

/// The Go type of a served kind's protobuf message, if the sim knows it.
pub fn knows(kind: &str) -> bool {
    TYPES.contains_key(kind)
}

/// `kind`'s message encoded from its JSON object (the raw of its protobuf body).
pub fn encode(kind: &str, v: &Value) -> Option<BytesMut> {
    let mut out = BytesMut::with_capacity(1024);
    message(&TYPES, kind, v, &mut out);
    TYPES.contains_key(kind).then_some(out)
}

/// The message `ty` with every non-pointer field empty: what a `BOOKMARK` carries.
pub fn empty(kind: &str) -> Option<BytesMut> {
    encode(kind, &Value::Object(Default::default()))
}

fn message(schema: &Schema, ty: &str, v: &Value, out: &mut BytesMut) {
    let Some(defs) = schema.get(ty) else { return };
    for d in defs {
        let value = if d.json == "-" {
            Some(v)
        } else {
            v.get(d.json)
        };
        let value = value.filter(|x| !x.is_null());
        if d.repeated {
            for item in value.and_then(Value::as_array).into_iter().flatten() {
                scalar(schema, d, item, out);
            }
            continue;
        }
        match value {
            Some(x) => scalar(schema, d, x, out),
            None if d.pointer => {}
            None => scalar(schema, d, &Value::Null, out),
        }
    }
}

fn scalar(schema: &Schema, d: &FieldDef, v: &Value, out: &mut BytesMut) {
    let n = d.number;
    match &d.ty {
        Type::Str => bytes_field(out, n, v.as_str().unwrap_or("").as_bytes()),
        Type::Int => varint_field(out, n, v.as_i64().unwrap_or(0) as u64),
        Type::Bool => varint_field(out, n, u64::from(v.as_bool().unwrap_or(false))),
        Type::Time => bytes_field(out, n, &time(v.as_str().unwrap_or(""))),
        Type::Quantity => {
            let mut q = BytesMut::new();
            bytes_field(&mut q, 1, quantity(v).as_bytes());
            bytes_field(out, n, &q);
        }
        Type::IntOrString => {
            let mut m = BytesMut::new();
            match v {
                Value::String(s) => {
                    varint_field(&mut m, 1, 1);
                    varint_field(&mut m, 2, 0);
                    bytes_field(&mut m, 3, s.as_bytes());
                }
                other => {
                    varint_field(&mut m, 1, 0);
                    varint_field(&mut m, 2, other.as_i64().unwrap_or(0) as u64);
                    bytes_field(&mut m, 3, b"");
                }
            }
            bytes_field(out, n, &m);
        }
        Type::FieldsV1 => {
            let mut m = BytesMut::new();
            bytes_field(&mut m, 1, v.to_string().as_bytes());
            bytes_field(out, n, &m);
        }
        Type::Map | Type::QuantityMap | Type::BytesMap => {
            let Some(map) = v.as_object() else { return };
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (k, val) in entries {
                let mut e = BytesMut::new();
                bytes_field(&mut e, 1, k.as_bytes());
                match d.ty {
                    Type::QuantityMap => {
                        let mut q = BytesMut::new();
                        bytes_field(&mut q, 1, quantity(val).as_bytes());
                        bytes_field(&mut e, 2, &q);
                    }
                    Type::BytesMap => {
                        use base64::Engine;
                        let b = base64::engine::general_purpose::STANDARD
                            .decode(val.as_str().unwrap_or(""))
                            .unwrap_or_default();
                        bytes_field(&mut e, 2, &b);
                    }
                    _ => bytes_field(&mut e, 2, val.as_str().unwrap_or("").as_bytes()),
                }
                bytes_field(out, n, &e);
            }
        }
        Type::Message(ty) => {
            let mut m = BytesMut::new();
            let empty = Value::Object(Default::default());
            message(schema, ty, if v.is_null() { &empty } else { v }, &mut m);
            bytes_field(out, n, &m);
        }
    }
}

/// A Quantity's canonical string as JSON carries it (numbers as written).
fn quantity(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A `metav1.Time` (or `MicroTime`): `{1 seconds, 2 nanos}`, or nothing for
/// the zero time, as Go marshals it.
fn time(s: &str) -> BytesMut {
    let mut m = BytesMut::new();
    let Ok(t) = humantime::parse_rfc3339_weak(s) else {
        return m;
    };
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    varint_field(&mut m, 1, d.as_secs());
    varint_field(&mut m, 2, u64::from(d.subsec_nanos()));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use r8s::codec::protobuf::{fields, find};
    use serde_json::json;

    #[test]
    fn should_parse_every_type_it_names() {
        for (name, defs) in TYPES.iter() {
            for d in defs {
                if let Type::Message(m) = d.ty {
                    assert!(
                        TYPES.contains_key(m),
                        "{name}.{} names unknown type {m}",
                        d.json
                    );
                }
            }
        }
    }

    #[test]
    fn should_write_the_reference_empty_pod() {
        // Reference 12, the bookmark's Pod (v1.21) with resourceVersion unset.
        let raw = empty("Pod").unwrap();
        let hex: Vec<String> = raw.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex.join(" "),
            "0a 12 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 7a 00 \
             12 1c 1a 00 32 00 42 00 4a 00 52 00 58 00 60 00 68 00 82 01 00 8a 01 00 9a 01 00 c2 01 00 \
             1a 0e 0a 00 1a 00 22 00 2a 00 32 00 4a 00 5a 00"
        );
    }

    #[test]
    fn should_write_a_pod_as_the_reference_starts() {
        // Reference 12's GET: metadata starts name, generateName "",
        // namespace, selfLink ""; containers start name, image, command.
        let pod = json!({"metadata": {"name": "pod-00000", "namespace": "ns-0", "labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep"]}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}});
        let raw = encode("Pod", &pod).unwrap();
        let meta = find(&raw, 1).unwrap().unwrap();
        assert!(meta.starts_with(b"\x0a\x09pod-00000\x12\x00\x1a\x04ns-0\x22\x00"));
        let labels: Vec<&[u8]> = fields(meta)
            .map(|f| f.unwrap())
            .filter(|f| f.number == 11)
            .map(|f| f.value.bytes().unwrap())
            .collect();
        assert_eq!(
            labels,
            vec![&b"\x0a\x01a\x12\x011"[..], b"\x0a\x01b\x12\x012"]
        );
        let spec = find(&raw, 2).unwrap().unwrap();
        let c = find(spec, 2).unwrap().unwrap();
        assert!(c.starts_with(b"\x0a\x01c\x12\x0cbusybox:1.36\x1a\x05sleep\x2a\x00"));
        let status = find(&raw, 3).unwrap().unwrap();
        assert!(
            status
                .starts_with(b"\x0a\x07Pending\x1a\x00\x22\x00\x2a\x00\x32\x00\x4a\x0aBestEffort")
        );
    }
}
