module github.com/idface/idface

go 1.26.8
