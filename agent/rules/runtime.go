package rules

// runtimeRules judge the runtime probe's evidence. Placeholder until the rules land.
var runtimeRules = []Rule{}
