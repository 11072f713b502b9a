package rules

// containerdRules judge the containerd probe's evidence. Placeholder until the rules land.
var containerdRules = []Rule{}
