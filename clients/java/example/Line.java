package example;

import javax.persistence.CascadeType;
import javax.persistence.Entity;
import javax.persistence.Id;
import javax.persistence.JoinColumn;
import javax.persistence.ManyToOne;
import javax.persistence.Table;
import org.eclipse.persistence.annotations.ReturnInsert;

/** A child of Item, keyed the same way: its foreign key is the ID its parent's INSERT returned. */
@Entity
@Table(name = "el_line")
public class Line {
    @Id
    @ReturnInsert(returnOnly = true)
    private Long id;

    @ManyToOne(cascade = CascadeType.PERSIST)
    @JoinColumn(name = "item_id")
    private Item item;

    private String body;

    protected Line() {}

    public Line(Item item, String body) {
        this.item = item;
        this.body = body;
    }

    public Long getId() { return id; }

    public Item getItem() { return item; }

    public String getBody() { return body; }
}
