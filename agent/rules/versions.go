package rules

var versionRules []Rule
