package rules

var unitRules []Rule
