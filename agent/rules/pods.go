package rules

var podRules []Rule
