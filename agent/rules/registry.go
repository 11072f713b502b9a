package rules

// registryRules judge the registry probe's evidence. Placeholder until the rules land.
var registryRules = []Rule{}
