module profcol.test/difftarget

go 1.22
