package rules

var kubeletRules []Rule
