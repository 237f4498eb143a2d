#!/usr/bin/env bash
# PKI + kubeconfigs for a PRIVATE control plane (own etcd/apiserver in /work/scratch/node/cp, not the test bed's).
set -euo pipefail
d=/work/scratch/node/cp; mkdir -p $d/pki; cd $d/pki
API_IP=${API_IP:-10.244.77.1}; API_PORT=${API_PORT:-16443}; NODE=${NODE:-scratch-node}
o() { openssl "$@" >/dev/null 2>&1; }
o req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj /CN=scratch-ca
sign() { # name subj [ext]
  o req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "$2"
  if [ -n "${3:-}" ]; then echo "$3" > $1.ext; o x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $1.crt -days 3650 -extfile $1.ext
  else o x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $1.crt -days 3650; fi
}
sign apiserver /CN=kube-apiserver "subjectAltName=IP:$API_IP,IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
# the node's client identity: the Node authorizer + NodeRestriction key on CN=system:node:<name>, O=system:nodes
sign kubelet-client "/O=system:nodes/CN=system:node:$NODE"
# apiserver -> kubelet (logs, exec, port-forward)
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
o genrsa -out sa.key 2048; o rsa -in sa.key -pubout -out sa.pub
tok=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n'); echo "$tok,scratch-admin,scratch-admin,\"system:masters\"" > tokens.csv
kc() { # file user authlines
  cat > $d/$1 <<KC
apiVersion: v1
kind: Config
clusters: [{name: scratch, cluster: {server: "https://$API_IP:$API_PORT", certificate-authority: $d/pki/ca.crt}}]
users: [{name: $2, user: {$3}}]
contexts: [{name: $2, context: {cluster: scratch, user: $2}}]
current-context: $2
KC
}
kc admin.kubeconfig scratch-admin "token: $tok"
kc kubelet.kubeconfig "system:node:$NODE" "client-certificate: $d/pki/kubelet-client.crt, client-key: $d/pki/kubelet-client.key"
ls $d $d/pki
