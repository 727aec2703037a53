module profcol.example/demo/go-app

go 1.19
