"""Host health: checks over SSH, verdicts and golden hosts, remedies, tickets, bisect."""
