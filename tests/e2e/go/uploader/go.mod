module profcol.test/e2e/uploader

go 1.19
