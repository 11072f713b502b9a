package certs

// CertManagerExample shows how to get the same certificates from
// cert-manager (cert-manager.io/v1) instead of `nodediag certs`, in the
// namespace the collector and the agents run in: a self-signed Issuer
// bootstraps the CA, a CA Issuer signs with it, and one Certificate each for
// the collector (server auth, the Service's DNS names) and for the agents
// (client auth, O=nodediag:agents, shared by the DaemonSet's pods). Each
// Secret holds tls.crt, tls.key and ca.crt, which map to the flags
// --tls-cert, --tls-key and --ca (--client-ca for serve).
//
// To keep a CA made by `nodediag certs` instead of the self-signed one:
// `kubectl -n nodediag create secret tls nodediag-ca --cert ca.crt --key ca.key`
// and skip the first two objects.
//
// It is documentation (printed by `nodediag certs --help`); nodediag has no
// code that talks to cert-manager.
const CertManagerExample = `apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: nodediag-selfsigned, namespace: nodediag}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: nodediag-ca, namespace: nodediag}
spec:
  isCA: true
  commonName: nodediag-ca
  secretName: nodediag-ca
  duration: 87600h
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: nodediag-selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: nodediag-ca, namespace: nodediag}
spec: {ca: {secretName: nodediag-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: nodediag-collector, namespace: nodediag}
spec:
  secretName: nodediag-collector
  commonName: nodediag-collector.nodediag.svc
  dnsNames: [nodediag-collector, nodediag-collector.nodediag.svc, nodediag-collector.nodediag.svc.cluster.local]
  usages: [digital signature, server auth]
  duration: 8760h
  privateKey: {algorithm: ECDSA, size: 256, rotationPolicy: Always}
  issuerRef: {name: nodediag-ca, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: nodediag-agent, namespace: nodediag}
spec:
  secretName: nodediag-agent
  commonName: nodediag-agent
  subject: {organizations: ["nodediag:agents"]}
  usages: [digital signature, client auth]
  duration: 8760h
  privateKey: {algorithm: ECDSA, size: 256, rotationPolicy: Always}
  issuerRef: {name: nodediag-ca, kind: Issuer}
`
