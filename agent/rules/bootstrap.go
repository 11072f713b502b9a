package rules

var bootstrapRules []Rule
