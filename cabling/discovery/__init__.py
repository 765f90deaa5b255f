"""Parsers of what a built fabric reports: ibnetdiscover, iblinkinfo, ibstat, UFM REST, lldpctl JSON."""
