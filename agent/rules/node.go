package rules

var nodeRules []Rule
