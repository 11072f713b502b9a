// Package runcommand holds the tests of the run-command door: nodediag-vm.sh
// (the in-VM script that az vm run-command sends to a VM) and nodediag-az.sh
// (the operator side that sends it to one VM or to every VM of a resource
// group). The scripts are shell; the tests run them for real, against the
// example hosts of agent/testdata/hosts, an agent served on 127.0.0.1, and a
// stand-in for the az CLI (Azure itself cannot run here). See
// docs/run-command.md.
package runcommand
