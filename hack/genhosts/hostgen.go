package main

import "github.com/nodediag/nodediag/internal/hostgen"

// The scenarios are written against internal/hostgen, which the real-failure
// corpus (agent/corpus) builds its nodes with too.
type (
	tree  = hostgen.Tree
	node  = hostgen.Node
	ciRun = hostgen.CIRun
)

var (
	kubeletConfigYAML = hostgen.KubeletConfigYAML
	certPEM           = hostgen.CertPEM
	clientPEM         = hostgen.ClientPEM
	caPEM             = hostgen.CAPEM
	caStart           = hostgen.CAStart
	key               = hostgen.Key
	script            = hostgen.Script
	outputLog         = hostgen.OutputLog
	staticPod         = hostgen.StaticPod
)
