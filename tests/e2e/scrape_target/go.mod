module profcol.test/scrapetarget

go 1.22
